"""`evalrun --baseline`: the gate decides on the paired test against a baseline run."""

import json

import pytest

from agents.models import AgentVersion
from datasets.models import TestCase
from runs.comparing.gate import EXIT_NOTHING_TO_GATE
from runs.models import Run
from runs.services import dataset_baseline_pin
from tests.factories import DatasetFactory, TestCaseFactory
from tests.runs.review_helpers import CaseSpec, build_run
from tests.runs.test_evalrun import _evalrun

pytestmark = pytest.mark.django_db
PASS, FAIL = ("pass", 9.0), ("fail", 2.0)


@pytest.fixture
def dataset(agent):
    dataset = DatasetFactory(agent=agent, name="Refund policy")
    for n in range(10):
        TestCaseFactory(dataset=dataset, question=f"Q{n}", position=n)
    return dataset


def _run(agent, dataset, outcomes, *, key="", status=Run.Status.COMPLETED, **kwargs):
    cases = list(TestCase.objects.filter(dataset=dataset).order_by("position"))
    specs = [
        CaseSpec(question=case.question, expected=case.expected_answer, source_case_id=case.pk, repeats=[outcome])
        for case, outcome in zip(cases, outcomes, strict=False)
    ]
    return build_run(agent=agent, dataset=dataset, cases=specs, status=status, request_key=key, **kwargs)


def _gate(agent, dataset, *args):
    return _evalrun("--agent", agent.name, "--dataset", dataset.name, "--wait", "--request-key", "ci-42", *args)


@pytest.fixture
def v2(agent):
    return AgentVersion.objects.create(agent=agent, number=2)


def test_significantly_worse_than_the_baseline_exits_1(agent, dataset, v2):
    baseline = _run(agent, dataset, [PASS] * 10)
    _run(agent, dataset, [FAIL] * 6 + [PASS] * 4, key="ci-42", version=v2)
    code, out, _ = _gate(agent, dataset, "--baseline", str(baseline.pk), "--fail-on", "regression")
    assert code == 1
    sentence = "v2 fixes 0 and breaks 6 cases of 10; this is unlikely to be chance (p = 0.031)."
    assert f"Against baseline run #{baseline.pk}: {sentence}" in out
    assert "Mean score change −4.2 (95% interval" in out
    assert f"Significantly worse than baseline run #{baseline.pk} at alpha = 0.05." in out


def test_a_difference_that_may_be_noise_exits_0(agent, dataset, v2):
    baseline = _run(agent, dataset, [PASS] * 10)
    _run(agent, dataset, [FAIL] * 2 + [PASS] * 8, key="ci-42", version=v2)
    code, out, _ = _gate(agent, dataset, "--baseline", str(baseline.pk), "--fail-on", "regression")
    assert code == 0
    assert "v2 fixes 0 and breaks 2 cases of 10; not distinguishable from noise with 10 cases (p = 0.5)." in out
    assert "Passed: not significantly worse than the baseline." in out


def test_a_stricter_alpha_lets_the_same_run_pass(agent, dataset, v2):
    baseline = _run(agent, dataset, [PASS] * 10)
    _run(agent, dataset, [FAIL] * 6 + [PASS] * 4, key="ci-42", version=v2)
    code, _, _ = _gate(agent, dataset, "--baseline", str(baseline.pk), "--fail-on", "regression", "--alpha", "0.01")
    assert code == 0


def test_a_threshold_still_applies_with_a_baseline(agent, dataset, v2):
    baseline = _run(agent, dataset, [PASS] * 10)
    _run(agent, dataset, [FAIL] * 2 + [PASS] * 8, key="ci-42", version=v2)
    code, out, _ = _gate(
        agent, dataset, "--baseline", str(baseline.pk), "--fail-on", "regression", "--threshold", "0.9"
    )
    assert code == 1
    assert "Below the threshold: 80.0% < 90.0%." in out


def test_a_stopped_run_exits_2_with_the_reason_even_against_a_baseline(agent, dataset, v2):
    baseline = _run(agent, dataset, [PASS] * 10)
    run = _run(agent, dataset, [PASS] * 5 + [("skipped", None)] * 5, key="ci-42", version=v2, status=Run.Status.STOPPED)
    code, out, _ = _gate(agent, dataset, "--baseline", str(baseline.pk), "--fail-on", "regression", "--json")
    data = json.loads(out)
    assert code == 2 and data["exit_code"] == 2 and data["ok"] is False
    assert data["reason"] == f"Run #{run.pk} was stopped before it finished: 5 of 10 cases were not run."


def test_the_pinned_baseline_and_the_json_figures(agent, dataset, alice, v2):
    baseline = _run(agent, dataset, [PASS] * 10)
    dataset_baseline_pin(run=baseline, user=alice)
    _run(agent, dataset, [FAIL] * 6 + [PASS] * 4, key="ci-42", version=v2)
    code, out, _ = _gate(agent, dataset, "--baseline", "pinned", "--fail-on", "regression", "--json")
    data = json.loads(out)
    assert code == 1 and data["baseline_id"] == baseline.pk and data["fail_on"] == "regression"
    test = data["test"]
    assert (test["cases"], test["fixes"], test["breaks"]) == (10, 0, 6)
    assert test["p_value"] == pytest.approx(2 / 64) and test["significantly_worse"] is True
    assert test["test"] == "exact McNemar, two-sided" and len(test["interval_95"]) == 2
    assert data["judges_differ"] is None


def test_pinned_without_a_pinned_baseline_exits_2(agent, dataset):
    _run(agent, dataset, [PASS] * 10, key="ci-42")
    code, _, err = _gate(agent, dataset, "--baseline", "pinned")
    assert code == 2 and "has no pinned baseline" in err


def test_fail_on_needs_a_baseline(agent, dataset):
    code, _, err = _gate(agent, dataset, "--fail-on", "regression")
    assert code == 2 and "needs a --baseline" in err
    assert not Run.objects.exists()


def test_ignore_flaky_leaves_flaky_cases_out_and_lists_them(agent, dataset, v2):
    baseline = _run(agent, dataset, [PASS] * 10)
    flaky = list(TestCase.objects.filter(dataset=dataset).order_by("position")[:6])
    TestCase.objects.filter(pk__in=[c.pk for c in flaky]).update(flips=3, flip_chances=4)
    _run(agent, dataset, [FAIL] * 6 + [PASS] * 4, key="ci-42", version=v2)

    code, out, _ = _gate(agent, dataset, "--baseline", str(baseline.pk), "--fail-on", "regression", "--ignore-flaky")
    assert code == 0
    assert "Results: 4/4 passed (100.0%)" in out
    assert "Ignoring 6 flaky cases: #1 “Q0” (3/4 flips); #2 “Q1” (3/4 flips)" in out
    assert "v2 passes and fails the same cases as v1: no difference over 4 cases." in out

    code, out, _ = _gate(agent, dataset, "--baseline", str(baseline.pk), "--ignore-flaky", "--json")
    data = json.loads(out)
    assert data["ignored_flaky"]["count"] == 6 and data["total_counted"] == 4 and data["total"] == 10


def test_with_every_case_flaky_there_is_nothing_to_gate_on(agent, dataset):
    """Issue 34, item 6: not "0/0 passed" and exit 1, but a code of its own that says so."""
    TestCase.objects.filter(dataset=dataset).update(flips=3, flip_chances=4)
    _run(agent, dataset, [FAIL] * 5 + [PASS] * 5, key="ci-42")

    code, out, _ = _gate(agent, dataset, "--threshold", "0.9", "--ignore-flaky")
    assert code == EXIT_NOTHING_TO_GATE == 4
    assert "0/0 passed" not in out
    assert "Nothing to gate on: all 10 cases of this dataset are flaky" in out

    code, out, _ = _gate(agent, dataset, "--threshold", "0.9", "--ignore-flaky", "--json")
    data = json.loads(out)
    assert (data["exit_code"], data["ok"], data["nothing_to_gate"], data["pass_rate"]) == (4, False, True, None)


def test_different_judges_are_labelled(agent, dataset, v2):
    baseline = _run(agent, dataset, [PASS] * 10)
    _run(agent, dataset, [PASS] * 10, key="ci-42", version=v2, scorer="llm", judge_model="openai/gpt-4o")
    code, out, _ = _gate(agent, dataset, "--baseline", str(baseline.pk), "--fail-on", "regression")
    assert code == 0
    assert "The runs were scored by different judges" in out and "may come from the judge, not the agent" in out
