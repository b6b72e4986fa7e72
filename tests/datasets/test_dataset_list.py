"""The Datasets tab and its Extracting poll (datasets:list, datasets:list_rows)."""

import pytest
from django.urls import reverse

from datasets.models import Dataset
from tests.factories import AgentFactory, DatasetFactory, TestCaseFactory

HTMX = {"HTTP_HX_REQUEST": "true"}


def _url(agent) -> str:
    return reverse("datasets:list", args=[agent.pk])


@pytest.mark.django_db
def test_it_lists_datasets_with_status_case_count_and_creator(client_alice, agent, alice):
    ready = DatasetFactory(agent=agent, name="Refund questions", created_by=alice)
    TestCaseFactory.create_batch(3, dataset=ready)
    DatasetFactory(agent=agent, name="Uploaded plan", status=Dataset.Status.EXTRACTING)

    response = client_alice.get(_url(agent))

    assert response.status_code == 200
    html = response.content.decode()
    assert "Refund questions" in html and "Uploaded plan" in html
    assert 'class="badge badge-ready"' in html
    assert 'class="badge badge-extracting"' in html and "spinner" in html
    assert '<td class="num">3<span' in html
    assert "by alice" in html
    assert reverse("datasets:detail", args=[agent.pk, ready.pk]) in html


@pytest.mark.django_db
def test_failed_dataset_shows_its_reason_on_hover_and_on_the_page(client_alice, agent):
    DatasetFactory(agent=agent, status=Dataset.Status.FAILED, failure_reason="The PDF is encrypted.")

    html = client_alice.get(_url(agent)).content.decode()

    assert 'title="The PDF is encrypted."' in html
    assert '<div class="small failure-reason">The PDF is encrypted.</div>' in html


@pytest.mark.django_db
def test_empty_state_invites_to_generate_a_dataset(client_alice, agent):
    html = client_alice.get(_url(agent)).content.decode()

    assert "No evaluation datasets yet. Generate one to get started." in html
    assert reverse("datasets:create", args=[agent.pk]) in html


@pytest.mark.django_db
def test_generate_button_links_to_the_generate_page(client_alice, agent):
    html = client_alice.get(_url(agent)).content.decode()

    assert (
        f'<a class="btn btn-primary" href="{reverse("datasets:new", args=[agent.pk])}">✦ Generate Dataset</a>' in html
    )


@pytest.mark.django_db
def test_with_datasets_the_header_links_to_the_generate_page(client_alice, agent):
    DatasetFactory(agent=agent)

    html = client_alice.get(_url(agent)).content.decode()

    assert html.count(f'href="{reverse("datasets:new", args=[agent.pk])}"') == 1
    assert "No evaluation datasets yet" not in html


@pytest.mark.django_db
def test_at_the_limit_it_says_so_and_disables_new_datasets(client_alice, agent, settings):
    settings.EVALSITE_MAX_DATASETS_PER_AGENT = 3
    DatasetFactory.create_batch(3, agent=agent)

    html = client_alice.get(_url(agent)).content.decode()

    assert "This agent has 3 datasets, the most one agent can have." in html
    assert 'disabled aria-describedby="dataset-limit">New dataset</button>' in html
    assert 'disabled aria-describedby="dataset-limit">Generate Dataset</button>' in html
    assert f'href="{reverse("datasets:new", args=[agent.pk])}"' not in html


@pytest.mark.django_db
def test_htmx_request_gets_only_the_table_fragment(client_alice, agent):
    DatasetFactory(agent=agent, name="Smoke set")

    response = client_alice.get(_url(agent), **HTMX)

    html = response.content.decode()
    assert html.lstrip().startswith('<div id="dataset-table"')
    assert "Smoke set" in html
    assert "<html" not in html


@pytest.mark.django_db
def test_outsider_gets_404(client_charlie, agent):
    assert client_charlie.get(_url(agent)).status_code == 404


@pytest.mark.django_db
def test_anonymous_user_is_sent_to_login(client, agent):
    response = client.get(_url(agent))

    assert response.status_code == 302
    assert reverse("accounts:login") in response["Location"]


@pytest.mark.django_db
def test_post_is_not_allowed(client_alice, agent):
    assert client_alice.post(_url(agent)).status_code == 405


@pytest.mark.django_db
def test_other_agents_datasets_are_not_listed(client_alice, agent, team):
    DatasetFactory(agent=AgentFactory(team=team), name="Someone else's set")

    assert "Someone else&#x27;s set" not in client_alice.get(_url(agent)).content.decode()


# ---- the poll ------------------------------------------------------------------


def _rows_url(agent) -> str:
    return reverse("datasets:list_rows", args=[agent.pk])


@pytest.mark.django_db
def test_list_polls_every_3_seconds_while_a_dataset_is_extracting(client_alice, agent):
    DatasetFactory(agent=agent, status=Dataset.Status.EXTRACTING)

    page = client_alice.get(_url(agent)).content.decode()
    poll = client_alice.get(_rows_url(agent), **HTMX)

    assert "every 3s" in page
    assert poll.status_code == 200
    assert "every 3s" in poll.content.decode()


@pytest.mark.django_db
def test_poll_stops_with_286_and_no_trigger_once_nothing_is_extracting(client_alice, agent):
    dataset = DatasetFactory(agent=agent, status=Dataset.Status.EXTRACTING)
    Dataset.objects.filter(pk=dataset.pk).update(status=Dataset.Status.READY)

    poll = client_alice.get(_rows_url(agent), **HTMX)

    assert poll.status_code == 286
    html = poll.content.decode()
    assert "every 3s" not in html
    assert 'class="badge badge-ready"' in html


@pytest.mark.django_db
def test_page_without_extracting_datasets_does_not_poll(client_alice, agent):
    DatasetFactory(agent=agent)

    assert "every 3s" not in client_alice.get(_url(agent)).content.decode()


@pytest.mark.django_db
def test_poll_is_404_for_outsiders_405_for_post_and_redirects_anonymous(client_charlie, client_alice, client, agent):
    assert client_charlie.get(_rows_url(agent), **HTMX).status_code == 404
    assert client_alice.post(_rows_url(agent), **HTMX).status_code == 405
    assert client.get(_rows_url(agent), **HTMX).status_code == 302


@pytest.mark.django_db
def test_list_costs_a_fixed_number_of_queries(client_alice, agent, django_assert_max_num_queries):
    for _ in range(30):
        TestCaseFactory.create_batch(2, dataset=DatasetFactory(agent=agent))

    # Fixed per page, whatever the number of datasets: session, user, teams (3), agent, the
    # page's count and rows, the no-model banner's dismissal and the worker heartbeat.
    with django_assert_max_num_queries(13):
        assert client_alice.get(_url(agent)).status_code == 200


@pytest.mark.django_db
def test_the_list_shows_the_time_a_dataset_was_created_as_well_as_the_date(client_alice, agent, settings):
    import datetime

    settings.TIME_ZONE = "UTC"
    dataset = DatasetFactory(agent=agent, name="Timed")
    when = datetime.datetime(2026, 11, 30, 14, 5, tzinfo=datetime.UTC)
    type(dataset).objects.filter(pk=dataset.pk).update(created_at=when)

    html = client_alice.get(reverse("datasets:list", args=[agent.pk])).content.decode()

    assert "Nov 30, 2026, 14:05</time>" in html


@pytest.mark.django_db
def test_the_list_paginates_at_100_datasets(client_alice, agent):
    for number in range(101):
        DatasetFactory(agent=agent, name=f"Dataset {number:03d}")
    url = reverse("datasets:list", args=[agent.pk])

    first = client_alice.get(url).content.decode()
    second = client_alice.get(url, {"page": 2}, HTTP_HX_REQUEST="true").content.decode()

    assert first.count('<tr id="dataset-') == 100
    assert "1–100 of 101 datasets" in first and "Page 1 of 2" in first
    assert "Dataset 000" in second and "101–101 of 101 datasets" in second
    assert "Dataset 100" not in second
