"""Online evaluators' tests share these: an evaluator whose judge passed its preflight on the fake
model, and pending scores claimed for traces."""

from __future__ import annotations

from typing import Any

from monitoring.models import OnlineEvaluator, OnlineScore
from monitoring.online.scoring import evaluator_judge_config
from runs.models import JudgeConfig
from runs.services.preflight import judge_config_preflight
from tests.monitoring.factories import OnlineEvaluatorFactory, TraceFactory
from tests.runs.preflight_helpers import fit_judge


def preflighted(fake: Any, evaluator: OnlineEvaluator) -> JudgeConfig:
    """Run the evaluator's judge's preflight on the fake as a fit judge does (it passes); the
    rules added before this call still come first. Returns the configuration that passed."""
    fit_judge(fake)
    config = judge_config_preflight(config=evaluator_judge_config(evaluator))
    assert config.preflight_status == "passed", config.preflight
    assert evaluator_judge_config(evaluator) == config
    return config


def pending(evaluator: OnlineEvaluator, count: int = 1, **trace: Any) -> list[OnlineScore]:
    return [
        OnlineScore.objects.create(evaluator=evaluator, trace=TraceFactory(agent=evaluator.agent, **trace))
        for _ in range(count)
    ]


def evaluator_for(agent, **fields: Any) -> OnlineEvaluator:
    return OnlineEvaluatorFactory(agent=agent, **fields)
