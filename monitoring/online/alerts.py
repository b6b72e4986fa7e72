"""Threshold alerts of online evaluators: the pass rate of the last N scores below X.

`alert_check` runs after every score a judge made (scoring.py). It reads the evaluator's last
`alert_window` SCORED scores by one judge configuration (a figure of one judge, never two: each
configuration has its own alert), and:
- opens an Alert when their pass rate is below `alert_below` and none is open for that
  configuration (once: the check and the insert are made under a lock on the evaluator's row),
  then sends `alert_deliver` after commit;
- resolves the open one when the rate is back at or above the threshold.
Fewer than `alert_window` scores decide nothing: three unlucky answers are not a trend.
Unusable, abstained, skipped and error scores are not in the rate (they are neither pass nor fail).

`alert_deliver` posts the alert as JSON to the webhook (a timeout, no redirects followed) and
mails it; each outcome is written on `Alert.delivery` ("sent", or "failed: <why>") and nothing is
raised, so a dead webhook never fails scoring and a retry never sends twice.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx
from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from evalsite.enqueue import after_commit
from monitoring.models import Alert, OnlineEvaluator, OnlineScore
from runs.models import JudgeConfig

logger = logging.getLogger(__name__)
WEBHOOK_TIMEOUT = 10.0  # seconds, connect and read


def window_pass_rate(*, evaluator: OnlineEvaluator, judge_config: JudgeConfig) -> float | None:
    """The pass rate (0-1) of the last `alert_window` scores of this judge, None with fewer."""
    window = max(1, evaluator.alert_window)
    passed = list(
        OnlineScore.objects.filter(evaluator=evaluator, judge_config=judge_config, status=OnlineScore.Status.SCORED)
        .order_by("-scored_at", "-id")
        .values_list("passed", flat=True)[:window]
    )
    if len(passed) < window:
        return None
    return sum(1 for value in passed if value) / window


def alert_check(*, evaluator: OnlineEvaluator, judge_config: JudgeConfig) -> Alert | None:
    """Open or resolve this judge's alert; returns the alert opened, else None."""
    if evaluator.alert_below is None:
        return None
    with transaction.atomic():
        # Locks the evaluator's row (PostgreSQL) or the database (SQLite): two workers finishing
        # scores at once cannot both open an alert.
        OnlineEvaluator.objects.filter(pk=evaluator.pk).update(updated_at=F("updated_at"))
        rate = window_pass_rate(evaluator=evaluator, judge_config=judge_config)
        if rate is None:
            return None
        open_alert = Alert.objects.filter(evaluator=evaluator, judge_config=judge_config, resolved_at__isnull=True)
        if rate >= evaluator.alert_below:
            open_alert.update(resolved_at=timezone.now())
            return None
        if open_alert.exists():
            return None
        alert = Alert.objects.create(
            evaluator=evaluator,
            judge_config=judge_config,
            pass_rate=rate,
            window=evaluator.alert_window,
            threshold=evaluator.alert_below,
        )
        if evaluator.alert_webhook or evaluator.alert_email:
            _send(alert.pk)
    return alert


def _send(alert_id: int) -> None:
    from monitoring.tasks import alert_deliver as alert_deliver_task

    after_commit(lambda: alert_deliver_task.delay(alert_id))


def alert_payload(alert: Alert) -> dict[str, Any]:
    evaluator = alert.evaluator
    return {
        "alert": alert.pk,
        "agent": {"id": evaluator.agent_id, "name": evaluator.agent.name},
        "evaluator": {"id": evaluator.pk, "name": evaluator.name},
        "judge_config": {"id": alert.judge_config_id, "label": alert.judge_config.label},
        "pass_rate": round(alert.pass_rate, 4),
        "threshold": alert.threshold,
        "window": alert.window,
        "triggered_at": alert.triggered_at.isoformat(),
        "text": alert_text(alert),
    }


def alert_text(alert: Alert) -> str:
    return (
        f"{alert.evaluator.agent.name} · {alert.evaluator.name}: pass rate {alert.pass_rate:.0%} over the last "
        f"{alert.window} scores by {alert.judge_config.label}, below {alert.threshold:.0%}."
    )


def alert_deliver(*, alert_id: int) -> Alert | None:
    """Send the alert where its evaluator says, once per channel; never raises."""
    alert = Alert.objects.select_related("evaluator__agent", "judge_config").filter(pk=alert_id).first()
    if alert is None:
        return None
    delivery = dict(alert.delivery or {})
    evaluator = alert.evaluator
    if evaluator.alert_webhook and "webhook" not in delivery:
        delivery["webhook"] = _webhook(evaluator.alert_webhook, alert_payload(alert))
    if evaluator.alert_email and "email" not in delivery:
        delivery["email"] = _email(evaluator.alert_email, alert)
    Alert.objects.filter(pk=alert.pk).update(delivery=delivery)
    alert.delivery = delivery
    return alert


def _webhook(url: str, payload: dict[str, Any]) -> str:
    try:
        response = httpx.post(url, json=payload, timeout=WEBHOOK_TIMEOUT, follow_redirects=False)
    except httpx.HTTPError as error:
        logger.warning("Alert webhook %s failed: %s", url, error)
        return f"failed: {type(error).__name__}: {error}"[:300]
    if response.status_code >= 300:
        return f"failed: HTTP {response.status_code}"
    return "sent"


def _email(address: str, alert: Alert) -> str:
    text = alert_text(alert)
    try:
        send_mail(f"Evalsite alert: {alert.evaluator.name}", text, settings.DEFAULT_FROM_EMAIL, [address])
    except Exception as error:  # SMTP refused, unreachable...: recorded on the alert, never raised
        logger.warning("Alert email to %s failed: %s", address, error)
        return f"failed: {type(error).__name__}: {error}"[:300]
    return "sent"
