"""The comparison page."""

import pytest
from django.urls import reverse

from agents.models import AgentVersion
from tests.factories import AgentFactory, DatasetFactory
from tests.runs.review_helpers import XSS, CaseSpec, build_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def pair(agent):
    dataset = DatasetFactory(agent=agent)
    v2 = AgentVersion.objects.create(agent=agent, number=2)
    a = build_run(
        agent=agent,
        dataset=dataset,
        cases=[
            CaseSpec(question="Refund window?", repeats=[("pass", 9.0)]),
            CaseSpec(question="SLA credit?", repeats=[("fail", 2.0)]),
        ],
    )
    b = build_run(
        agent=agent,
        dataset=dataset,
        version=v2,
        cases=[
            CaseSpec(question="Refund window?", repeats=[("fail", 4.0)]),
            CaseSpec(question="SLA credit?", repeats=[("pass", 9.0)]),
        ],
    )
    return a, b


def _url(agent, **params):
    return reverse("runs:compare", args=[agent.pk]), params


def test_the_page_lists_regressions_and_fixes_first(client_alice, agent, pair):
    a, b = pair
    url, params = _url(agent, a=a.pk, b=b.pk)
    body = client_alice.get(url, params).content.decode()
    assert "Directly comparable" in body and "version 1 → 2" in body
    assert "1 regression" in body and "1 fix" in body
    table = body[body.index('class="table compare-table"') :]
    assert table.index("Regression") < table.index("Fixed")
    assert table.index(">Refund window?</div>") < table.index(">SLA credit?</div>")
    assert '<span class="delta-bad">-5</span>' in table
    assert '<span class="delta-good">+7</span>' in table
    assert f'href="{reverse("runs:detail", args=[agent.pk, b.pk])}#case-0"' in body


def test_runs_that_differ_beyond_the_agent_are_labelled(client_alice, agent, pair):
    a, b = pair
    b.scoring = {**b.scoring, "judge_prompt": "Be lenient."}
    b.save()
    body = client_alice.get(*_url(agent, a=a.pk, b=b.pk)).content.decode()
    assert "Not directly comparable." in body
    assert "Judge prompt: changed between the runs." in body


def test_runs_of_different_datasets_are_refused(client_alice, agent, pair):
    a, _ = pair
    other = build_run(agent=agent, dataset=DatasetFactory(agent=agent, name="Billing"), cases=[CaseSpec()])
    body = client_alice.get(*_url(agent, a=a.pk, b=other.pk)).content.decode()
    assert "pick two runs of the same dataset" in body
    assert "compare-table" not in body


def test_a_run_of_another_agent_is_refused(client_alice, agent, team, pair):
    a, _ = pair
    foreign_agent = AgentFactory(team=team)
    foreign = build_run(agent=foreign_agent, dataset=DatasetFactory(agent=foreign_agent), cases=[CaseSpec()])
    body = client_alice.get(*_url(agent, a=a.pk, b=foreign.pk)).content.decode()
    assert "Pick a run of this agent." in body


def test_without_a_choice_the_pickers_are_shown(client_alice, agent, pair):
    body = client_alice.get(reverse("runs:compare", args=[agent.pk])).content.decode()
    assert "Pick two runs of one dataset" in body
    pickers = body[body.index('class="card compare-pickers"') : body.index('class="card compare-matrix-picker"')]
    assert pickers.count(f'<option value="{pair[0].pk}"') == 2  # A and B
    matrix_picker = body[body.index('class="card compare-matrix-picker"') :]
    assert matrix_picker.count(f'<option value="{pair[0].pk}"') == 1  # the several-runs picker


def test_htmx_gets_the_comparison_alone(client_alice, agent, pair):
    a, b = pair
    response = client_alice.get(*_url(agent, a=a.pk, b=b.pk), HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="compare-body"')
    assert "<html" not in body


def test_case_text_is_escaped(client_alice, agent):
    dataset = DatasetFactory(agent=agent)
    a = build_run(agent=agent, dataset=dataset, cases=[CaseSpec(question=XSS)])
    b = build_run(agent=agent, dataset=dataset, cases=[CaseSpec(question=XSS, repeats=[("fail", 1.0)])])
    body = client_alice.get(*_url(agent, a=a.pk, b=b.pk)).content.decode()
    assert "<script>alert" not in body
    assert "&lt;script&gt;" in body


def test_it_only_accepts_get(client_alice, agent):
    assert client_alice.post(reverse("runs:compare", args=[agent.pk])).status_code == 405


def test_outsiders_get_404_and_anonymous_visitors_log_in(client_charlie, client, agent, pair):
    a, b = pair
    assert client_charlie.get(*_url(agent, a=a.pk, b=b.pk)).status_code == 404
    assert client.get(reverse("runs:compare", args=[agent.pk]))["Location"].startswith(reverse("accounts:login"))


def test_the_page_says_whether_the_difference_is_real(client_alice, agent, pair):
    a, b = pair
    body = client_alice.get(*_url(agent, a=a.pk, b=b.pk)).content.decode()
    assert "v2 fixes 1 and breaks 1 case of 2; not distinguishable from noise with 2 cases (p = 1)." in body
    assert "Mean score change +1.0 (95% interval −5.0 to +7.0" in body
    assert "Different judges." not in body


def test_answers_are_shown_side_by_side_with_a_word_diff(client_alice, agent):
    dataset = DatasetFactory(agent=agent)
    a = build_run(agent=agent, dataset=dataset, cases=[CaseSpec(question="Refund?", answer="Within 30 days.")])
    b = build_run(
        agent=agent,
        dataset=dataset,
        cases=[CaseSpec(question="Refund?", answer="Within 14 days.", repeats=[("fail", 3.0)])],
    )
    body = client_alice.get(*_url(agent, a=a.pk, b=b.pk)).content.decode()
    answers = body[body.index('class="compare-answers"') :]
    assert answers.count(">Refund?</div>") == 1  # the question once
    assert ">Within 30 days.</div>" in answers and ">Within 14 days.</div>" in answers
    assert "<del>30 </del><ins>14 </ins>days." in answers
    assert answers.count("Offline reference scorer: 1 of 1 key points covered.") == 2  # both reasonings


def test_different_judges_are_labelled_and_changes_are_not_called_regressions(client_alice, agent, pair):
    a, b = pair
    b.judge_model, b.scorer = "openai/gpt-4o", "llm"
    b.save()
    body = client_alice.get(*_url(agent, a=a.pk, b=b.pk)).content.decode()
    assert "Different judges." in body and "The runs were scored by different judges" in body
    table = body[body.index('class="table compare-table"') :]
    assert "Fails now (other judge)" in table and "Passes now (other judge)" in table
    assert ">Regression<" not in table and ">Fixed<" not in table
    assert "1 now failing" in body and "1 regression" not in body


def _matrix_runs(agent, dataset):
    versions = [agent.current_version] + [AgentVersion.objects.create(agent=agent, number=n) for n in (2, 3, 4, 5)]
    verdicts = [  # per run: Refund window?, SLA credit?, Phone?
        [("pass", 9.0), ("fail", 2.0), ("pass", 8.0)],
        [("pass", 9.0), ("fail", 3.0), ("fail", 4.0)],
        [("fail", 4.0), ("pass", 8.0), ("pass", 8.0)],
        [("pass", 8.0), ("pass", 9.0), ("fail", 3.0)],
        [("fail", 3.0), ("pass", 9.0), ("pass", 9.0)],
    ]
    questions = ["Refund window?", "SLA credit?", "Phone?"]
    return [
        build_run(
            agent=agent,
            dataset=dataset,
            version=version,
            cases=[CaseSpec(question=q, repeats=[o]) for q, o in zip(questions, outcomes, strict=True)],
        )
        for version, outcomes in zip(versions, verdicts, strict=True)
    ]


def test_five_runs_as_a_matrix_with_regressions_first(client_alice, agent):
    from runs.comparing.matrix import run_matrix

    runs = _matrix_runs(agent, DatasetFactory(agent=agent))
    matrix = run_matrix(runs=list(reversed(runs)))
    assert [column.run.pk for column in matrix.columns] == [run.pk for run in runs]
    assert [(row.question, row.change) for row in matrix.rows] == [
        ("Refund window?", "regression"),
        ("SLA credit?", "fix"),
        ("Phone?", "moved"),
    ]
    assert [cell.status for cell in matrix.rows[0].cells] == ["pass", "pass", "fail", "pass", "fail"]
    assert (matrix.columns[4].test.fixes, matrix.columns[4].test.breaks) == (1, 1)

    url = reverse("runs:compare", args=[agent.pk])
    body = client_alice.get(url, {"runs": [run.pk for run in runs]}).content.decode()
    table = body[body.index('class="table matrix-table"') :]
    assert table.index("Refund window?") < table.index("SLA credit?") < table.index("Phone?")
    assert "1 regression" in body and "1 fix" in body and "1 changed in between" in body
    assert table.count('class="matrix-cell"') == 15


def test_the_matrix_takes_two_to_five_runs_of_one_dataset(client_alice, agent):
    dataset = DatasetFactory(agent=agent)
    runs = _matrix_runs(agent, dataset)
    sixth = build_run(agent=agent, dataset=dataset, cases=[CaseSpec()])
    url = reverse("runs:compare", args=[agent.pk])
    too_many = client_alice.get(url, {"runs": [r.pk for r in runs] + [sixth.pk]}).content.decode()
    assert "Pick between 2 and 5 runs (you picked 6)." in too_many and "matrix-table" not in too_many
    other = build_run(agent=agent, dataset=DatasetFactory(agent=agent), cases=[CaseSpec()])
    mixed = client_alice.get(url, {"runs": [runs[0].pk, other.pk]}).content.decode()
    assert "Pick runs of the same dataset." in mixed
    partial = client_alice.get(url, {"runs": [runs[0].pk, runs[1].pk]}, HTTP_HX_REQUEST="true").content.decode()
    assert "matrix-table" in partial and "<html" not in partial
