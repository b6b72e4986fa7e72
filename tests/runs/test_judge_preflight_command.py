"""`manage.py judge_preflight`: the console's judge preflighted from a terminal (make local-model)."""

import io

import pytest
from django.core.management import call_command

from tests.runs.preflight_helpers import fit_judge

pytestmark = pytest.mark.django_db


def _command(*args):
    out = io.StringIO()
    with pytest.raises(SystemExit) as ended:
        call_command("judge_preflight", *args, stdout=out, stderr=out)
        raise SystemExit(0)
    return ended.value.code, out.getvalue()


def test_a_fit_judge_passes_and_exits_0(fake_llm):
    fit_judge(fake_llm)
    code, out = _command()
    assert code == 0
    assert "PASSED: 15 of 15 answers in place" in out
    assert "✓ Q1 exact" in out


def test_a_judge_that_scores_everything_alike_fails_and_exits_1(fake_llm):
    code, out = _command()  # the fake judge gives every answer 8
    assert code == 1
    assert "FAILED:" in out and "✗" in out
    assert "marked as scored by a judge that failed preflight" in out


def test_without_a_judge_model_there_is_nothing_to_preflight(no_llm):
    code, out = _command()
    assert code == 2
    assert "No judge model is configured" in out
