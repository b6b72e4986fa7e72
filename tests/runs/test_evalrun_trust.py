"""`evalrun` and the gate with results the offline scorer abstained on, and with a judge that
failed preflight: an abstention is neither pass nor fail, and an untrusted judge is no evidence."""

import json

import pytest

from datasets.models import TestCase
from runs.models import Run
from tests.factories import DatasetFactory, TestCaseFactory
from tests.runs.review_helpers import CaseSpec, build_run
from tests.runs.test_evalrun import _evalrun

pytestmark = pytest.mark.django_db
PASS, FAIL, ABSTAINED = ("pass", 9.0), ("fail", 2.0), ("abstained", None)


@pytest.fixture
def dataset(agent):
    dataset = DatasetFactory(agent=agent, name="Refund plan")
    for n in range(5):
        TestCaseFactory(dataset=dataset, question=f"Q{n}", position=n)
    return dataset


def _run(agent, dataset, outcomes, **kwargs):
    cases = list(TestCase.objects.filter(dataset=dataset).order_by("position"))
    specs = [
        CaseSpec(question=case.question, expected=case.expected_answer, source_case_id=case.pk, repeats=[outcome])
        for case, outcome in zip(cases, outcomes, strict=True)
    ]
    return build_run(agent=agent, dataset=dataset, cases=specs, request_key="ci-7", **kwargs)


def _gate(agent, dataset, *args):
    return _evalrun("--agent", agent.name, "--dataset", dataset.name, "--wait", "--request-key", "ci-7", *args)


def test_abstentions_are_left_out_of_the_pass_rate_and_named(agent, dataset):
    _run(agent, dataset, [PASS, PASS, PASS, ABSTAINED, ABSTAINED])
    code, out, _ = _gate(agent, dataset)
    assert code == 0
    assert "Results: 3/3 passed (100.0%)" in out
    assert "2 results need a judge model" in out and "left out of the pass rate" in out
    assert "Passed: 100.0% meets the threshold of 100.0%." in out


def test_a_failure_beside_abstentions_still_fails_the_gate(agent, dataset):
    _run(agent, dataset, [PASS, FAIL, ABSTAINED, ABSTAINED, ABSTAINED])
    code, out, _ = _gate(agent, dataset, "--threshold", "0.9")
    assert code == 1
    assert "Results: 1/2 passed (50.0%)" in out


def test_when_every_result_needs_a_judge_there_is_nothing_to_gate_on(agent, dataset):
    _run(agent, dataset, [ABSTAINED] * 5)
    code, out, _ = _gate(agent, dataset, "--json")
    assert code == 4  # as when --ignore-flaky leaves no case: no pass rate, no test
    data = json.loads(out)
    assert data["abstained"] == 5 and data["ok"] is False
    assert data["reason"].startswith("Nothing to gate on: every result needs a judge model.")


def test_a_run_whose_judge_failed_preflight_exits_2_unless_allowed(agent, dataset):
    run = _run(agent, dataset, [PASS] * 5, scorer=Run.Scorer.LLM, judge_failed_preflight=True)
    code, out, _ = _gate(agent, dataset)
    assert code == 2
    assert "The judge failed preflight: its scores are not trustworthy." in out
    assert out.strip().endswith("Pass --allow-failed-preflight to gate on its scores.")

    code, out, _ = _gate(agent, dataset, "--allow-failed-preflight", "--json")
    data = json.loads(out)
    assert code == 0 and data["run_id"] == run.pk and data["judge_failed_preflight"] is True


def test_unusable_judge_answers_and_cut_answers_are_said_before_the_verdict(agent, dataset):
    cases = list(TestCase.objects.filter(dataset=dataset).order_by("position"))
    cut = [{"call": "agent", "limit": 256}]
    specs = [CaseSpec(question=c.question, source_case_id=c.pk, cut=cut if c.position < 2 else []) for c in cases]
    specs[4] = CaseSpec(
        question=cases[4].question, source_case_id=cases[4].pk, repeats=[("error", None)], error_kind="judge_unusable"
    )
    build_run(agent=agent, dataset=dataset, cases=specs, request_key="ci-7")
    code, out, _ = _gate(agent, dataset)
    lines = out.strip().splitlines()
    assert code == 1
    assert "1 judge answer unusable: counted as errors." in lines
    assert "2 agent answers were cut at 256 tokens: raise EVALSITE_LLM_MAX_TOKENS_AGENT." in lines
    assert lines[-1].startswith("Below the threshold")
