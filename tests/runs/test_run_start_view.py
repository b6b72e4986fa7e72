import pytest
from django.urls import reverse

from datasets.models import Dataset
from runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def dataset(make_dataset, agent, no_llm):
    return make_dataset(2, agent=agent)


def _url(dataset):
    return reverse("runs:start", args=[dataset.agent_id, dataset.pk])


def test_it_starts_a_run_and_opens_its_page(client_alice, dataset):
    response = client_alice.post(_url(dataset), {"request_key": "abc"}, follow=True)
    run = Run.objects.get()
    assert response.redirect_chain[-1][0] == reverse("runs:detail", args=[dataset.agent_id, run.pk])
    assert "Evaluation run started" in response.content.decode()
    assert run.request_key == "abc"


def test_htmx_gets_a_client_redirect(client_bob, dataset):
    response = client_bob.post(_url(dataset), {"request_key": "abc"}, HTTP_HX_REQUEST="true")
    run = Run.objects.get()
    assert response.status_code == 200
    assert response["HX-Redirect"] == reverse("runs:detail", args=[dataset.agent_id, run.pk])


def test_a_double_submit_starts_one_run(client_alice, dataset):
    client_alice.post(_url(dataset), {"request_key": "same-key"})
    response = client_alice.post(_url(dataset), {"request_key": "same-key"})
    assert Run.objects.count() == 1
    assert response["Location"] == reverse("runs:detail", args=[dataset.agent_id, Run.objects.get().pk])


def test_a_dataset_that_cannot_run_says_why(client_alice, dataset):
    Dataset.objects.filter(pk=dataset.pk).update(status=Dataset.Status.EXTRACTING)
    response = client_alice.post(_url(dataset), {"request_key": "k"}, follow=True)
    assert not Run.objects.exists()
    assert "still being prepared" in response.content.decode()


def test_htmx_gets_an_error_toast_when_the_dataset_cannot_run(client_alice, dataset):
    dataset.cases.all().delete()
    response = client_alice.post(_url(dataset), {"request_key": "k"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 422
    assert "no test cases" in response["HX-Trigger"]


def test_it_only_accepts_post(client_alice, dataset):
    assert client_alice.get(_url(dataset)).status_code == 405


def test_an_outsider_gets_404(client_charlie, dataset):
    assert client_charlie.post(_url(dataset), {"request_key": "k"}).status_code == 404
    assert not Run.objects.exists()


def test_another_agents_dataset_is_404(client_alice, dataset, make_dataset, team):
    other = make_dataset(1)
    url = reverse("runs:start", args=[dataset.agent_id, other.pk])
    assert client_alice.post(url, {"request_key": "k"}).status_code == 404


def test_anonymous_users_are_sent_to_log_in(client, dataset):
    response = client.post(_url(dataset), {"request_key": "k"})
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("accounts:login"))
