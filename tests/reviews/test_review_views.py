"""The review control on the result cards, its two posts, the run's review figures and the queue pages."""

import pytest
from django.urls import reverse

from datasets.models import TestCase
from reviews.models import CaseEdit, Review
from runs.models import RunCase
from tests.factories import TestCaseFactory
from tests.reviews.conftest import results_of
from tests.runs.review_helpers import CaseSpec, build_run


def _review_url(run, result, name="reviews:review"):
    return reverse(name, args=[run.agent_id, run.pk, result.pk])


def _run_url(run):
    return reverse("runs:detail", args=[run.agent_id, run.pk])


def test_the_run_page_shows_a_review_control_on_every_card(client_alice, ten_run):
    response = client_alice.get(_run_url(ten_run), {"tab": "review"})  # its figures above the cards

    assert response.status_code == 200
    text = response.content.decode()
    assert text.count("data-review-control") == 10
    assert text.count("data-review-agree") == 10
    assert "Not reviewed yet" in text
    assert reverse("reviews:run_figures", args=[ten_run.agent_id, ten_run.pk]) in text
    assert "js/reviews.js" in text


def test_agreeing_from_a_card_saves_and_returns_to_the_card(client_alice, alice, ten_run):
    result = results_of(ten_run)[3]

    response = client_alice.post(_review_url(ten_run, result), {"verdict": "agree"})

    assert response.status_code == 302
    assert response["Location"].endswith(f"#case-{result.case.position}")
    review = Review.objects.get()
    assert (review.result, review.reviewer, review.agrees, review.passed) == (result, alice, True, True)


def test_an_htmx_override_returns_the_control_with_both_verdicts(client_alice, ten_run):
    result = results_of(ten_run)[0]

    response = client_alice.post(
        _review_url(ten_run, result),
        {"verdict": "fail", "score": "4", "note": "Wrong fee <b>x</b>"},
        headers={"HX-Request": "true"},
    )

    assert response.status_code == 200
    text = response.content.decode()
    assert text.lstrip().startswith('<section class="review" id="review-')
    assert "<html" not in text
    assert "alice" in text and "Wrong fee &lt;b&gt;x&lt;/b&gt;" in text
    assert 'class="badge review-badge badge-pass">Pass</span>' in text  # the judge's verdict stays
    assert "Your override" in text
    assert response["HX-Trigger"] == '{"reviewed": {}}'
    assert Review.objects.get().score == 4


def test_a_bad_review_says_why_where_the_reviewer_is(client_alice, ten_run):
    result = results_of(ten_run)[0]
    htmx = client_alice.post(
        _review_url(ten_run, result), {"verdict": "pass", "score": "12"}, headers={"HX-Request": "true"}
    )
    assert htmx.status_code == 422
    assert "less than or equal to 10" in htmx["HX-Trigger"]
    plain = client_alice.post(_review_url(ten_run, result), {"verdict": ""}, follow=True)
    assert "Agree, or choose pass or fail." in plain.content.decode()
    assert not Review.objects.exists()


def test_the_card_shows_every_reviewer_and_their_disagreement(client_alice, client_bob, ten_run):
    result = results_of(ten_run)[0]
    client_alice.post(_review_url(ten_run, result), {"verdict": "agree"})
    client_bob.post(_review_url(ten_run, result), {"verdict": "fail", "note": "Misses the fee"})

    text = client_alice.get(_run_url(ten_run)).content.decode()

    assert "<strong>alice</strong>" in text and "<strong>bob</strong>" in text
    assert "Misses the fee" in text
    assert "Reviewers disagree" in text


def test_the_run_figures_put_the_reviewed_pass_rate_beside_the_judges(client_alice, ten_run):
    results = results_of(ten_run)
    for index, verdict in [(0, "agree"), (1, "fail"), (2, "fail"), (7, "pass")]:
        client_alice.post(_review_url(ten_run, results[index]), {"verdict": verdict})

    response = client_alice.get(reverse("reviews:run_figures", args=[ten_run.agent_id, ten_run.pk]))

    text = " ".join(response.content.decode().split())
    assert "Judge <strong>7/10</strong> passed" in text
    assert "Reviewed <strong>6/10</strong> passed" in text
    assert "<strong>4</strong> reviewed, 3 overridden" in text


def test_the_expected_answer_is_corrected_from_the_card(client_alice, ten_run):
    result = results_of(ten_run)[0]
    snapshot = RunCase.objects.filter(pk=result.case_id).values().get()

    response = client_alice.post(
        _review_url(ten_run, result, "reviews:case_correct"),
        {"expected_answer": "Refunds within 14 days.", "judge_guideline": ""},
        headers={"HX-Request": "true"},
    )

    assert response.status_code == 200
    assert TestCase.objects.get(pk=result.case.source_case_id).expected_answer == "Refunds within 14 days."
    assert RunCase.objects.filter(pk=result.case_id).values().get() == snapshot
    assert CaseEdit.objects.count() == 1
    text = response.content.decode()
    edit_url = reverse("datasets:case_edit", args=[ten_run.agent_id, ten_run.dataset_id, result.case.source_case_id])
    assert "expected answer changed after this run" in text and edit_url in text
    page = client_alice.get(_run_url(ten_run)).content.decode()
    assert page.count("expected answer changed after this run") == 1
    assert "Refunds are available within 30 days of purchase." in page  # the card shows what it was judged against


def test_an_unchanged_correction_is_refused_with_a_message(client_alice, ten_run):
    result = results_of(ten_run)[0]
    response = client_alice.post(
        _review_url(ten_run, result, "reviews:case_correct"),
        {"expected_answer": result.case.expected_answer, "judge_guideline": ""},
        follow=True,
    )
    assert "Nothing changed" in response.content.decode()


@pytest.mark.parametrize("name", ["reviews:review", "reviews:case_correct"])
def test_the_posts_refuse_get_and_outsiders(client_alice, client_charlie, client, ten_run, name):
    result = results_of(ten_run)[0]
    url = _review_url(ten_run, result, name)
    assert client_alice.get(url).status_code == 405
    assert client_charlie.post(url, {"verdict": "agree"}).status_code == 404
    assert client.post(url, {"verdict": "agree"})["Location"].startswith(reverse("accounts:login"))
    assert not Review.objects.exists() and not CaseEdit.objects.exists()


def test_a_result_of_another_run_is_404(client_alice, agent, dataset, ten_run):
    from tests.runs.review_helpers import CaseSpec, build_run

    other = build_run(agent=agent, dataset=dataset, cases=[CaseSpec()])
    result = results_of(other)[0]
    url = reverse("reviews:review", args=[agent.pk, ten_run.pk, result.pk])
    assert client_alice.post(url, {"verdict": "agree"}).status_code == 404


@pytest.mark.parametrize("name", ["reviews:run_queue", "reviews:agent_queue"])
def test_the_queue_pages_list_doubtful_results_with_their_reasons(client_alice, ten_run, name):
    args = [ten_run.agent_id, ten_run.pk] if name == "reviews:run_queue" else [ten_run.agent_id]

    response = client_alice.get(reverse(name, args=args))

    assert response.status_code == 200
    text = response.content.decode()
    # Scores 7.5/10 (twice) sit within a point of the line; the rest are confident: a sample of 3.
    assert text.count("data-review-item") == 5
    assert text.count("Within 1 point of the pass line: a point either way changes the verdict</span>") == 2
    assert "Random sample of confident results" in text
    assert 'aria-current="page">Review</a>' in text


def test_the_queue_filters_and_the_post_comes_back_to_it(client_alice, ten_run):
    url = reverse("reviews:run_queue", args=[ten_run.agent_id, ten_run.pk])
    near = client_alice.get(url, {"reason": "near_threshold"})
    assert near.content.decode().count("data-review-item") == 2
    first = results_of(ten_run)[2]  # a score of 7.5: the first of the queue

    response = client_alice.post(
        _review_url(ten_run, first), {"verdict": "agree", "next": f"{url}?reason=near_threshold"}
    )

    assert response["Location"] == f"{url}?reason=near_threshold"
    assert client_alice.get(response["Location"]).content.decode().count("data-review-item") == 1


def test_a_foreign_next_address_is_not_followed(client_alice, ten_run):
    result = results_of(ten_run)[0]
    response = client_alice.post(_review_url(ten_run, result), {"verdict": "agree", "next": "https://evil.example/"})
    assert response["Location"].startswith(_run_url(ten_run))


def test_the_card_page_costs_the_same_queries_with_reviews(client_alice, ten_run):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client_alice.get(_run_url(ten_run))
    with CaptureQueriesContext(connection) as before:
        client_alice.get(_run_url(ten_run))
    for result in results_of(ten_run):
        # htmx posts: a plain post leaves a message in the session, which the next page reads.
        client_alice.post(
            _review_url(ten_run, result), {"verdict": "fail", "note": "n"}, headers={"HX-Request": "true"}
        )
    assert Review.objects.count() == 10
    with CaptureQueriesContext(connection) as after:
        client_alice.get(_run_url(ten_run))
    assert len(after.captured_queries) == len(before.captured_queries)


def test_the_queue_shows_a_scenario_by_its_goal_not_an_expected_answer(client_alice, agent, dataset):
    scenario = {"goal": "Get a refund for order A-1001", "plan": "Ask for a refund.", "max_turns": 4}
    run = build_run(
        agent=agent,
        dataset=dataset,
        cases=[CaseSpec(question="My order arrived broken.", expected="", data={"scenario": scenario},
                        repeats=[("fail", 3.0)], answer="I've issued a full refund.")],
    )  # fmt: skip
    page = client_alice.get(reverse("reviews:run_queue", args=[agent.pk, run.pk])).content.decode()
    assert "User's goal" in page and "Get a refund for order A-1001" in page
    assert "Agent's last reply" in page and "I&#x27;ve issued a full refund." in page
    assert "(none: judged against the criteria)" not in page


def test_a_scenario_card_offers_to_correct_its_judge_guideline_not_an_expected_answer(client_alice, agent, dataset):
    case = TestCaseFactory(dataset=dataset, question="My order arrived broken.", expected_answer="")
    scenario = {"goal": "Get a refund for order A-1001", "plan": "Ask for a refund.", "max_turns": 4}
    run = build_run(
        agent=agent,
        dataset=dataset,
        cases=[CaseSpec(question=case.question, expected="", data={"scenario": scenario}, source_case_id=case.pk,
                        repeats=[("fail", 3.0)], answer="I've issued a full refund.")],
    )  # fmt: skip
    page = client_alice.get(_run_url(run)).content.decode()
    assert "The judge guideline is wrong" in page
    assert "The expected answer is wrong" not in page
    assert '<textarea name="expected_answer"' not in page
