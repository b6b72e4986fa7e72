"""Agreement figures: per judge configuration and per tag, on the agreement page, the agent page,
the exports and the API."""

import csv
import io
import json

import pytest
from django.test import Client
from django.urls import reverse
from openpyxl import load_workbook

from accounts import services as account_services
from reviews import services
from reviews.selectors import agreement_groups, judge_key
from runs.reports import exporters, xlsx_export
from tests.reviews.conftest import results_of
from tests.runs.review_helpers import CaseSpec, build_run


@pytest.fixture
def reviewed_run(ten_run, alice, bob):
    """Judge 7 pass / 3 fail. alice: agrees on 4 passes, fails 2 passes (scores 3 and 4), agrees on
    1 fail, passes 1 fail (score 8). bob reviews result 0 too and fails it.
    alice's table: pp 4, pf 2, fp 1, ff 1 -> 5 of 8 agree."""
    results = results_of(ten_run)
    for index in (0, 2, 4, 6):
        services.review_save(result=results[index], reviewer=alice, agrees=True)
    services.review_save(result=results[1], reviewer=alice, agrees=False, passed=False, score=3, note="Wrong fee")
    services.review_save(result=results[3], reviewer=alice, agrees=False, passed=False, score=4)
    services.review_save(result=results[7], reviewer=alice, agrees=True)
    services.review_save(result=results[8], reviewer=alice, agrees=False, passed=True, score=8)
    services.review_save(result=results[0], reviewer=bob, agrees=False, passed=False)
    return ten_run


def test_the_groups_count_every_review_against_the_judge(reviewed_run):
    (group,) = agreement_groups(runs=[reviewed_run])
    # alice's 8 plus bob's fail of a judge pass: pp 4, pf 3, fp 1, ff 1.
    assert group.figures.confusion.as_dict() == {
        "judge_pass_reviewer_pass": 4,
        "judge_pass_reviewer_fail": 3,
        "judge_fail_reviewer_pass": 1,
        "judge_fail_reviewer_fail": 1,
    }
    # po = 5/9; judge passes 7, reviewer passes 5: pe = (7*5 + 2*4)/81 = 43/81; kappa = (45-43)/(81-43) = 2/38.
    assert group.figures.kappa == pytest.approx(2 / 38)
    # Scores: agrees take the judge's (diff 0, 5 of them); |9-3| + |7.5-4| + |3-8| = 14.5 over 8 scored pairs.
    assert group.figures.mae == pytest.approx(14.5 / 8)
    assert len(group.disagreements) == 4
    assert (group.reviewers.results, group.reviewers.agreed) == (1, 0)
    assert {tag for tag, _ in group.tags} == {"refunds", "billing"}


def test_each_judge_configuration_is_its_own_group(reviewed_run, agent, alice):
    other = build_run(agent=agent, cases=[CaseSpec(repeats=[("pass", 9.0)])], judge_model="gpt-4o-mini", scorer="llm")
    services.review_save(result=results_of(other)[0], reviewer=alice, agrees=True)
    assert judge_key(other) != judge_key(reviewed_run)

    groups = agreement_groups(runs=[reviewed_run, other])

    assert [(g.figures.reviewed, g.runs) for g in groups] == [(9, 1), (1, 1)]
    assert "gpt-4o-mini" in groups[1].label
    assert groups[1].figures.kappa is None  # one verdict on both sides: undefined


def test_the_agreement_page_shows_figures_matrix_and_linked_disagreements(client_alice, reviewed_run):
    response = client_alice.get(reverse("reviews:agreement", args=[reviewed_run.agent_id]))

    assert response.status_code == 200
    text = " ".join(response.content.decode().split())
    assert "<dt>Agreement</dt><dd>56%</dd>" in text
    assert '<dt>Cohen\'s kappa</dt><dd title="">0.05</dd>' in text
    assert '<td class="is-disagree">3</td>' in text
    assert "Disagreements (4)" in text
    card = reverse("runs:detail", args=[reviewed_run.agent_id, reviewed_run.pk]) + "#case-1"
    assert card in text
    assert "Wrong fee" in text


def test_the_agreement_page_filters_by_tag(client_alice, reviewed_run):
    response = client_alice.get(reverse("reviews:agreement", args=[reviewed_run.agent_id]), {"tag": "billing"})
    # Billing are the odd positions: 1 (fail, score 3), 3 (fail, score 4), 7 (agree on fail): 1 of 3.
    assert "<dt>Reviewed</dt><dd>3</dd>" in " ".join(response.content.decode().split())
    empty = client_alice.get(reverse("reviews:agreement", args=[reviewed_run.agent_id]), {"tag": "nope"})
    assert "Nothing reviewed yet with the tag" in empty.content.decode()


def test_the_agent_page_loads_its_agreement_panel_from_reviews_view(client_alice, reviewed_run):
    text = client_alice.get(reverse("agents:detail", args=[reviewed_run.agent_id])).content.decode()

    assert reverse("reviews:agent_panel", args=[reviewed_run.agent_id]) in text
    assert 'id="agent-agreement"' in text and "review-panel" not in text  # the panel comes with its view


def test_the_agent_panel_shows_the_agreement_and_its_chart(client_alice, reviewed_run):
    response = client_alice.get(reverse("reviews:agent_panel", args=[reviewed_run.agent_id]))

    text = " ".join(response.content.decode().split())
    assert "Judge agreement" in text
    assert "<dt>Reviewed</dt><dd>9</dd>" in text
    assert "<svg" in text and f"run #{reviewed_run.pk}: 5 of 9" in text


def test_the_agent_panel_without_reviews_says_so(client_alice, ten_run):
    text = client_alice.get(reverse("reviews:agent_panel", args=[ten_run.agent_id])).content.decode()
    assert "No result is reviewed yet." in text


def test_exports_carry_the_reviewer_columns(reviewed_run):
    rows = list(csv.DictReader(io.StringIO(exporters.run_export_csv(reviewed_run))))
    assert rows[0]["reviewed_verdict"] == "fail"  # bob's, the latest
    assert rows[0]["reviews"] == "2"
    assert rows[0]["reviewers"] == "alice: agree; bob: fail"
    assert rows[1]["reviewers"] == "alice: fail 3/10" and rows[1]["review_notes"] == "alice: Wrong fee"
    assert rows[9]["reviews"] == "" and rows[9]["reviewed_verdict"] == ""

    data = json.loads(exporters.run_export_json(reviewed_run))
    assert data["run"]["reviews"]["reviewed"] == 8
    assert data["run"]["reviews"]["agreement"]["kappa"] == pytest.approx(2 / 38, abs=1e-4)
    assert [r["reviewer"] for r in data["results"][0]["reviews"]] == ["alice", "bob"]
    assert data["results"][9]["reviews"] is None

    sheet = load_workbook(io.BytesIO(xlsx_export.run_export_xlsx(reviewed_run)))["Results"]
    header = [cell.value for cell in sheet[1]]
    assert header[-4:] == ["reviewed_verdict", "reviews", "reviewers", "review_notes"]
    assert sheet.cell(row=3, column=len(header) - 1).value == "alice: fail 3/10"

    html = exporters.run_export_html(reviewed_run)
    assert "Human review" in html and "reviewed 5/10 passed" in html and "8 reviewed" in html


# ---- the API -----------------------------------------------------------------------------


@pytest.fixture
def api(alice) -> Client:
    _, raw = account_services.api_token_create(user=alice, name="CI")
    return Client(headers={"Authorization": f"Bearer {raw}"})


def test_the_api_posts_a_review_and_lists_results_with_reviews(api, ten_run):
    result = results_of(ten_run)[0]
    url = f"/api/runs/{ten_run.pk}/results/{result.pk}/review"

    created = api.post(url, {"verdict": "fail", "score": 3, "note": "Wrong"}, content_type="application/json")
    replaced = api.post(url, {"verdict": "agree"}, content_type="application/json")
    refused = api.post(url, {"verdict": "maybe"}, content_type="application/json")
    out_of_range = api.post(url, {"verdict": "pass", "score": 11}, content_type="application/json")

    assert created.status_code == 201 and created.json()["verdict"] == "fail" and created.json()["score"] == 3
    assert replaced.status_code == 200 and replaced.json()["agrees"] is True and replaced.json()["verdict"] == "pass"
    assert refused.status_code == 422 and out_of_range.status_code == 422
    listed = api.get(f"/api/runs/{ten_run.pk}/reviews").json()
    assert listed["count"] == 10
    first = listed["items"][0]
    assert (first["id"], first["case_position"], first["status"]) == (result.pk, 1, "pass")
    assert [(r["reviewer"], r["agrees"]) for r in first["reviews"]] == [("alice", True)]


def test_the_api_reads_the_queue_and_the_agreement(api, ten_run, bob):
    queue = api.get(f"/api/runs/{ten_run.pk}/review-queue").json()
    # The two 7.5/10 results (cases 3 and 4) sit within a point of the line; then a sample of 3.
    assert [(item["case_position"], item["reasons"][0]) for item in queue[:2]] == [
        (3, "near_threshold"),
        (4, "near_threshold"),
    ]
    assert [item["reasons"] for item in queue[2:]] == [["sample"]] * 3
    # The agent's queue draws its own sample (seeded by the agent), after the same doubtful results.
    whole = api.get(f"/api/agents/{ten_run.agent_id}/review-queue").json()
    assert whole[:2] == queue[:2] and len(whole) == 5
    near = api.get(f"/api/runs/{ten_run.pk}/review-queue", {"reason": "near_threshold"}).json()
    assert [item["case_position"] for item in near] == [3, 4]


def test_the_api_reads_the_agreement_per_judge_configuration(api, reviewed_run):
    agreement = api.get(f"/api/agents/{reviewed_run.agent_id}/agreement").json()
    (config,) = agreement["judge_configurations"]
    assert config["judge_config"] == judge_key(reviewed_run)[0]
    assert config["reviewed"] == 9 and config["agreed"] == 5
    assert config["confusion"]["judge_pass_reviewer_fail"] == 3
    assert len(config["disagreements"]) == 4


def test_the_api_hides_other_teams_runs(charlie, ten_run):
    _, raw = account_services.api_token_create(user=charlie, name="outsider")
    outsider = Client(headers={"Authorization": f"Bearer {raw}"})
    result = results_of(ten_run)[0]
    assert outsider.get(f"/api/runs/{ten_run.pk}/reviews").status_code == 404
    posted = outsider.post(
        f"/api/runs/{ten_run.pk}/results/{result.pk}/review", {"verdict": "agree"}, content_type="application/json"
    )
    assert posted.status_code == 404
    assert outsider.get(f"/api/agents/{ten_run.agent_id}/agreement").status_code == 404
    assert Client().get(f"/api/runs/{ten_run.pk}/review-queue").status_code == 401


def test_the_api_documents_the_review_endpoints(client):
    schema = client.get("/api/openapi.json").json()
    assert {
        "/api/runs/{run_id}/reviews",
        "/api/runs/{run_id}/results/{result_id}/review",
        "/api/runs/{run_id}/review-queue",
        "/api/agents/{agent_id}/review-queue",
        "/api/agents/{agent_id}/agreement",
    } <= set(schema["paths"])


def test_a_judge_configuration_is_named_once_not_judge_judge(client_alice, reviewed_run):
    from runs.judging.configs import dataset_judge_config

    config = dataset_judge_config(dataset=reviewed_run.dataset)
    type(reviewed_run).objects.filter(pk=reviewed_run.pk).update(judge_config=config)
    reviewed_run.refresh_from_db()
    pages = {
        "agreement": client_alice.get(reverse("reviews:agreement", args=[reviewed_run.agent_id])).content.decode(),
        "agent": client_alice.get(reverse("reviews:agent_panel", args=[reviewed_run.agent_id])).content.decode(),
        "report": exporters.run_export_html(reviewed_run),
    }
    for name, page in pages.items():
        text = " ".join(page.split()).lower()
        assert config.label in text, name
        assert "judge judge" not in text and "judge: judge" not in text, name
