"""Threshold alerts (issue 47, point 4): the pass rate of an evaluator's last N scores by one judge
configuration below X opens one alert, resolved when the rate is back; it is posted to a webhook
(a real HTTP server here) and mailed, each outcome recorded on the alert, nothing raised."""

import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core import mail
from django.utils import timezone

from monitoring.models import Alert, OnlineScore
from monitoring.online.alerts import alert_check, alert_deliver, window_pass_rate
from monitoring.online.scoring import evaluator_judge_config
from runs.judging.configs import judge_config_for
from tests.monitoring.factories import TraceFactory
from tests.monitoring.online_helpers import evaluator_for

pytestmark = pytest.mark.django_db


class _Hook(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.received.append((self.headers["Content-Type"], json.loads(body)))
        self.send_response(self.server.status)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def webhook():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    server.received, server.status = [], 204
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _scores(evaluator, config, passes: list[bool]) -> None:
    start = timezone.now() - timedelta(minutes=len(passes))
    for number, passed in enumerate(passes):
        OnlineScore.objects.create(
            evaluator=evaluator,
            judge_config=config,
            trace=TraceFactory(agent=evaluator.agent),
            status=OnlineScore.Status.SCORED,
            score=8 if passed else 2,
            passed=passed,
            scored_at=start + timedelta(minutes=number),
        )


@pytest.fixture
def evaluator(agent, fake_llm):
    return evaluator_for(agent, alert_window=4, alert_below=0.5)


def test_a_pass_rate_below_the_threshold_opens_one_alert_and_recovery_resolves_it(evaluator):
    config = evaluator_judge_config(evaluator)
    _scores(evaluator, config, [True, True, False, False, False])

    assert window_pass_rate(evaluator=evaluator, judge_config=config) == 0.25  # the last 4 only
    alert = alert_check(evaluator=evaluator, judge_config=config)
    assert alert is not None and (alert.pass_rate, alert.window, alert.threshold) == (0.25, 4, 0.5)
    assert alert_check(evaluator=evaluator, judge_config=config) is None  # still open: not a second one

    _scores(evaluator, config, [True, True, True])
    alert_check(evaluator=evaluator, judge_config=config)

    alert.refresh_from_db()
    assert alert.resolved_at is not None and Alert.objects.count() == 1


def test_fewer_scores_than_the_window_decide_nothing(evaluator):
    config = evaluator_judge_config(evaluator)
    _scores(evaluator, config, [False, False, False])

    assert alert_check(evaluator=evaluator, judge_config=config) is None


def test_two_judges_are_never_pooled_in_one_rate(evaluator):
    config = evaluator_judge_config(evaluator)
    other = judge_config_for(dataset=None, scoring={**evaluator.scoring, "pass_threshold": 9})
    _scores(evaluator, config, [True, True, True, True])
    _scores(evaluator, other, [False, False, False, False])

    assert alert_check(evaluator=evaluator, judge_config=config) is None
    alert = alert_check(evaluator=evaluator, judge_config=other)
    assert alert.judge_config == other and alert.pass_rate == 0


def test_unusable_and_skipped_scores_are_not_in_the_rate(evaluator):
    config = evaluator_judge_config(evaluator)
    _scores(evaluator, config, [True, True, True, True])
    for status in ("unusable", "skipped", "error", "abstained"):
        OnlineScore.objects.create(
            evaluator=evaluator, judge_config=config, status=status, scored_at=timezone.now(), trace=TraceFactory()
        )

    assert window_pass_rate(evaluator=evaluator, judge_config=config) == 1.0


def test_an_alert_is_posted_to_its_webhook_and_mailed(
    evaluator, webhook, django_capture_on_commit_callbacks, tasks_run_here
):
    evaluator.alert_webhook = f"http://127.0.0.1:{webhook.server_address[1]}/hooks/evalsite"
    evaluator.alert_email = "oncall@example.com"
    evaluator.save()
    config = evaluator_judge_config(evaluator)
    _scores(evaluator, config, [False] * 4)

    with django_capture_on_commit_callbacks(execute=True):
        alert = alert_check(evaluator=evaluator, judge_config=config)

    alert.refresh_from_db()
    assert alert.delivery == {"webhook": "sent", "email": "sent"}
    ((content_type, payload),) = webhook.received
    assert content_type == "application/json"
    assert payload["evaluator"] == {"id": evaluator.pk, "name": evaluator.name}
    assert payload["judge_config"]["id"] == config.pk and payload["pass_rate"] == 0 and payload["window"] == 4
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["oncall@example.com"]
    assert "pass rate 0% over the last 4 scores" in mail.outbox[0].body
    alert_deliver(alert_id=alert.pk)  # a second delivery (a redelivered message) sends nothing again
    assert len(webhook.received) == 1 and len(mail.outbox) == 1


def test_a_failing_webhook_is_recorded_never_raised(evaluator, webhook):
    webhook.status = 500
    evaluator.alert_webhook = f"http://127.0.0.1:{webhook.server_address[1]}/"
    evaluator.save()
    config = evaluator_judge_config(evaluator)
    _scores(evaluator, config, [False] * 4)
    alert = alert_check(evaluator=evaluator, judge_config=config)

    assert alert_deliver(alert_id=alert.pk).delivery == {"webhook": "failed: HTTP 500"}


def test_an_unreachable_webhook_is_recorded_never_raised(evaluator, webhook):
    port = webhook.server_address[1]
    webhook.shutdown()
    webhook.server_close()  # nothing listens there any more
    evaluator.alert_webhook = f"http://127.0.0.1:{port}/"
    evaluator.save()
    config = evaluator_judge_config(evaluator)
    _scores(evaluator, config, [False] * 4)
    alert = alert_check(evaluator=evaluator, judge_config=config)

    assert alert_deliver(alert_id=alert.pk).delivery["webhook"].startswith("failed: ConnectError")
