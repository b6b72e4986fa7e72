"""Preflighting a judge configuration: ask its judge the calibration set (runs.judging.preflight),
store the outcome on the configuration, and mark the runs it scored when it fails.

A configuration is preflighted once (its outcome is kept on it); `force` asks again. From a
page it runs as a job (`judge_preflight_start`, the task runs.tasks.judge_config_preflight),
with a marker in the cache while it runs so the page can poll; evalrun and tests call
`judge_config_preflight` directly. The offline scorer needs none.

The judge is asked through runs.judging.scoring.judge, as for a real result, with the configuration's
prompt, worked examples and threshold; the dataset's criteria are left out, since they are
written for its own cases, not for the calibration questions.
"""

from __future__ import annotations

import time
from decimal import Decimal
from typing import Any

from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from evalsite.llm import identity
from evalsite.llm.client import call_bound
from runs.judging import configs as judging
from runs.judging import preflight
from runs.judging.scoring import Evaluation, JudgeError, judge
from runs.models import JudgeConfig, Run

PASSED, FAILED = "passed", "failed"
RUNNING_KEY = "evalsite:judge-preflight:"


def judge_preflight_needed(config: JudgeConfig | None) -> bool:
    """A model judge never preflighted (the offline scorer needs none)."""
    return config is not None and bool(config.judge_model) and not config.preflight_status


def judge_config_preflight(*, config: JudgeConfig, force: bool = False) -> JudgeConfig:
    """Preflight the configuration now, unless it was (then its stored outcome stands).

    Returns the configuration the outcome belongs to: `config` itself, or a new one when the
    server reported another model behind the judge's name than the one `config` was made for.
    """
    if not config.judge_model:
        raise ValueError("The offline scorer needs no preflight.")
    if config.preflight_status and not force:
        return config
    outcome = _ask_calibration(config)
    target = judging.config_again(config)  # the identity the calls just reported may be new
    with transaction.atomic():
        locked = JudgeConfig.objects.select_for_update().get(pk=target.pk)
        locked.preflight_status = outcome["status"]
        locked.preflight = outcome
        locked.save(update_fields=["preflight_status", "preflight"])
        if outcome["status"] == FAILED:
            # Runs it scored before its preflight was known: they say so too.
            Run.objects.filter(judge_config=locked).update(judge_failed_preflight=True)
    return locked


def _ask_calibration(config: JudgeConfig) -> dict[str, Any]:
    scoring = _scoring(config)
    started = time.monotonic()
    outcomes, tokens, cost = [], 0, 0.0
    for item in preflight.calibration_items():
        evaluation = Evaluation(question=item.question, answer=item.answer, expected_answer=item.expected)
        outcome = preflight.ItemOutcome(item)
        trace: dict[str, str | int] = {"preflight": config.pk, "item": item.number}
        try:
            judgment = judge(evaluation, scoring, trace)
        except JudgeError as error:
            outcome.problem = error.message
            tokens, cost = tokens + error.tokens, cost + error.cost
        else:
            tokens, cost = tokens + judgment.tokens, cost + judgment.cost
            # judge() has checked the answer (runs.judging.checks): an unusable one raised above.
            outcome.score, outcome.reasoning = judgment.score, judgment.reasoning
        outcomes.append(outcome)
    reasons = preflight.grade(outcomes, threshold=config.threshold)
    seen = identity.identity_refresh(config.judge_model)
    return {
        "status": FAILED if reasons else PASSED,
        "reasons": reasons,
        "items": [outcome.as_dict() for outcome in outcomes],
        "in_place": sum(1 for outcome in outcomes if outcome.in_place),
        "total": len(outcomes),
        "threshold": config.threshold,
        "tokens": tokens,
        "cost": round(cost, 6),
        "seconds": round(time.monotonic() - started, 1),
        "ran_at": timezone.now().isoformat(),
        "model": config.judge_model,
        "model_identity": seen.text if seen else "",
        # Shown when the server said more than the name it was asked for.
        "model_reported": seen.shown if seen and seen.shown != seen.requested else "",
    }


def _scoring(config: JudgeConfig) -> dict[str, Any]:
    scoring = {key: value for key, value in config.settings.items() if key not in judging.CRITERIA_KEYS}
    scoring["judge_model"] = config.judge_model
    scoring["pass_threshold"] = config.threshold
    return scoring


def judge_preflight_cost(config: JudgeConfig) -> Decimal:
    return Decimal(str(config.preflight.get("cost") or 0))


# ---- as a job ----------------------------------------------------------------------------


def judge_preflight_start(*, config: JudgeConfig, force: bool = False) -> bool:
    """Queue the configuration's preflight; False when one for its dataset is already under way."""
    from runs.tasks import judge_config_preflight as judge_config_preflight_task

    key = _running_key(config.dataset_id)
    longest = len(preflight.calibration_items()) * call_bound("judge") + 60
    if not cache.add(key, config.pk, int(longest)):
        return False

    def send() -> None:
        try:
            judge_config_preflight_task.delay(config.pk, force)
        except Exception:
            cache.delete(key)  # no message, no preflight: the button is offered again
            raise

    transaction.on_commit(send, robust=True)
    return True


def judge_preflight_run(*, config_id: int, force: bool = False) -> None:
    """The job: preflight, then clear the marker whatever happened, so the page stops polling."""
    config = JudgeConfig.objects.filter(pk=config_id).first()
    try:
        if config is not None:
            judge_config_preflight(config=config, force=force)
    finally:
        cache.delete(_running_key(config.dataset_id if config else None))


def judge_preflight_running(*, dataset_id: int | None) -> bool:
    return cache.get(_running_key(dataset_id)) is not None


def _running_key(dataset_id: int | None) -> str:
    # Per dataset (the console's default judge: "console"): the dialog re-reads the dataset's
    # configuration, which a new model identity may have replaced meanwhile.
    return RUNNING_KEY + (str(dataset_id) if dataset_id else "console")


# ---- what the pages show -------------------------------------------------------------------------


def judge_preflight_state(*, config: JudgeConfig) -> str:
    """ "offline" (no preflight needed), "running", "passed", "failed" or "unchecked"."""
    if not config.judge_model:
        return "offline"
    if config.preflight_status:
        return config.preflight_status
    return "running" if judge_preflight_running(dataset_id=config.dataset_id) else "unchecked"
