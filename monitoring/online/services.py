"""Online evaluators' writes: create, update (enable and disable among them) and delete, for the
pages (monitoring/evaluator_views.py) and the API (monitoring/api_evaluators.py) alike.

Every setting is checked here, so both callers refuse the same input with the same message: a
ValidationError keyed by field. The user must be a member of the agent's team (views and the API
already 404 another team's agent; this guards any other caller). A judge configuration is made
for the evaluator's judge settings at once, and its preflight is started when it never ran, so
the page shows the judge's state before the first production trace arrives.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from accounts.models import Membership
from agents.models import Agent
from monitoring.models import OnlineEvaluator
from monitoring.online.filters import filters_clean
from runs.judging.configs import JUDGE_KEYS

# The judge settings an evaluator may hold (a dataset's, less those that need expected answers).
SCORING_KEYS = (
    "acceptance_criteria",
    "rejection_criteria",
    "evaluation_criteria",
    "judge_model",
    "judge_prompt",
    "pass_threshold",
    "judge_resamples",
)
SETTINGS = (
    "name",
    "enabled",
    "scope",
    "idle_minutes",
    "filters",
    "sampling_rate",
    "daily_cost_cap",
    "scoring",
    "alert_window",
    "alert_below",
    "alert_webhook",
    "alert_email",
)
assert set(SCORING_KEYS) <= set(JUDGE_KEYS)


def _check_member(*, agent: Agent, user: Any) -> None:
    if not Membership.objects.filter(team_id=agent.team_id, user=user).exists():
        raise PermissionDenied("Only a member of the agent's team can change its online evaluators.")


def online_evaluator_create(*, agent: Agent, user: Any, settings: dict[str, Any]) -> OnlineEvaluator:
    _check_member(agent=agent, user=user)
    values = evaluator_settings_clean(settings, agent=agent)
    if not values.get("name"):
        raise ValidationError({"name": "Give the evaluator a name."})
    with transaction.atomic():
        evaluator = OnlineEvaluator(agent=agent, created_by=user, **values)
        evaluator.save()
        _judge_prepare(evaluator)
    return evaluator


def online_evaluator_update(*, evaluator: OnlineEvaluator, user: Any, settings: dict[str, Any]) -> OnlineEvaluator:
    """Change the settings given (the others keep their value). Enabling a disabled evaluator
    starts it at the traces received from now on: the ones that came while it was off are not
    scored after the fact (they would spend the day's cap on old traffic)."""
    _check_member(agent=evaluator.agent, user=user)
    values = evaluator_settings_clean(settings, agent=evaluator.agent, evaluator=evaluator)
    with transaction.atomic():
        locked = OnlineEvaluator.objects.select_for_update().get(pk=evaluator.pk)
        if values.get("enabled") and not locked.enabled:
            locked.swept_until = timezone.now()
        for name, value in values.items():
            setattr(locked, name, value)
        locked.save()
        _judge_prepare(locked)
    return locked


def online_evaluator_delete(*, evaluator: OnlineEvaluator, user: Any) -> None:
    """Its scores and alerts go with it; the judge configurations stay (runs may share them)."""
    _check_member(agent=evaluator.agent, user=user)
    evaluator.delete()


def _judge_prepare(evaluator: OnlineEvaluator) -> None:
    from monitoring.online.scoring import evaluator_judge_config
    from runs.services.preflight import judge_preflight_needed, judge_preflight_start

    if not evaluator.enabled:
        return
    config = evaluator_judge_config(evaluator)
    if judge_preflight_needed(config):
        judge_preflight_start(config=config)  # after commit; False when one is under way already


# ---- validation ------------------------------------------------------------------------------


def evaluator_settings_clean(
    raw: dict[str, Any], *, agent: Agent, evaluator: OnlineEvaluator | None = None
) -> dict[str, Any]:
    """The settings given, checked and normalised; ValidationError {field: message} otherwise."""
    unknown = sorted(set(raw) - set(SETTINGS))
    if unknown:
        raise ValidationError({unknown[0]: f"Unknown setting {', '.join(unknown)}."})
    errors: dict[str, str] = {}
    values: dict[str, Any] = {}
    for name, value in raw.items():
        try:
            values[name] = _CLEANERS[name](value)
        except ValidationError as error:
            errors[name] = " ".join(error.messages)
    new_name = values.get("name")
    if new_name:
        namesakes = OnlineEvaluator.objects.filter(agent=agent, name=new_name)
        if evaluator is not None:
            namesakes = namesakes.exclude(pk=evaluator.pk)
        if namesakes.exists():
            errors["name"] = f"This agent already has an evaluator named “{new_name}”."
    if errors:
        raise ValidationError(errors)
    return values


def _name(value: Any) -> str:
    name = str(value or "").strip()
    if len(name) > 120:
        raise ValidationError("At most 120 characters.")
    return name


def _number(value: Any, *, low: float, high: float, what: str, whole: bool = False) -> float | int:
    try:
        number = int(value) if whole and not isinstance(value, float) else float(value)
    except (TypeError, ValueError):
        raise ValidationError(f"{what} must be a number from {low:g} to {high:g}.") from None
    if isinstance(value, bool) or not low <= number <= high or (whole and number != int(value)):
        raise ValidationError(f"{what} must be a {'whole ' if whole else ''}number from {low:g} to {high:g}.")
    return int(number) if whole else number


def _money(value: Any) -> Decimal | None:
    if value in (None, ""):
        return None
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        raise ValidationError("The daily cost cap is an amount in USD, such as 5 or 2.50.") from None
    if not amount.is_finite() or amount < 0 or amount >= Decimal("1e10"):
        raise ValidationError("The daily cost cap is an amount in USD from 0 up.")
    return amount.quantize(Decimal("0.01"))


def _scoring(value: Any) -> dict[str, Any]:
    if value in (None, ""):
        return {}
    if not isinstance(value, dict):
        raise ValidationError('The judge settings are an object, such as {"evaluation_criteria": "..."}.')
    unknown = sorted(set(value) - set(SCORING_KEYS))
    if unknown:
        raise ValidationError(f"Unknown judge setting {', '.join(unknown)}: they are {', '.join(SCORING_KEYS)}.")
    cleaned: dict[str, Any] = {}
    for key in ("acceptance_criteria", "rejection_criteria", "evaluation_criteria", "judge_prompt"):
        text = str(value.get(key) or "").strip()
        if len(text) > 10_000:
            raise ValidationError(f"{key} is longer than 10,000 characters.")
        if text:
            cleaned[key] = text
    model = str(value.get("judge_model") or "").strip()
    if len(model) > 200:
        raise ValidationError("judge_model is longer than 200 characters.")
    if model:
        cleaned["judge_model"] = model
    if value.get("pass_threshold") not in (None, ""):
        cleaned["pass_threshold"] = _number(value["pass_threshold"], low=0, high=10, what="pass_threshold", whole=True)
    if value.get("judge_resamples") not in (None, "", 0):
        cleaned["judge_resamples"] = _number(
            value["judge_resamples"], low=0, high=4, what="judge_resamples", whole=True
        )
    return cleaned


def _url(value: Any) -> str:
    from django.core.validators import URLValidator

    url = str(value or "").strip()
    if url:
        URLValidator(schemes=["http", "https"], message="The webhook is an http(s) URL.")(url)
        if len(url) > 500:
            raise ValidationError("The webhook URL is longer than 500 characters.")
    return url


def _email(value: Any) -> str:
    from django.core.validators import validate_email

    address = str(value or "").strip()
    if address:
        validate_email(address)
    return address


def _choice(value: Any) -> str:
    if value not in OnlineEvaluator.Scope.values:
        raise ValidationError(f"Scope is one of {', '.join(OnlineEvaluator.Scope.values)}.")
    return str(value)


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValidationError("Must be true or false.")
    return value


_CLEANERS = {
    "name": _name,
    "enabled": _boolean,
    "scope": _choice,
    "idle_minutes": lambda v: _number(v, low=1, high=10_080, what="Idle minutes", whole=True),
    "filters": filters_clean,
    "sampling_rate": lambda v: _number(v, low=0, high=1, what="The sampling rate"),
    "daily_cost_cap": _money,
    "scoring": _scoring,
    "alert_window": lambda v: _number(v, low=1, high=1000, what="The alert window", whole=True),
    "alert_below": lambda v: None if v in (None, "") else _number(v, low=0, high=1, what="The alert threshold"),
    "alert_webhook": _url,
    "alert_email": _email,
}
