"""The online evaluator's form: the rule (filters, sampling, cost cap, alert) and its judge, whose
fields are the dataset settings form's own (datasets/forms.py DatasetSettingsForm) less those that
need an expected answer or repeats. It only reads the page's fields into the settings dict that
monitoring.online.services checks, the same one the API sends."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import forms

from datasets.forms import DatasetSettingsForm
from datasets.models import DEFAULT_PASS_THRESHOLD
from monitoring.models import OnlineEvaluator
from monitoring.online.filters import FEEDBACK_CHOICES
from monitoring.online.services import SCORING_KEYS

JUDGE_HELP = (
    "The same judge as runs: its criteria, prompt, threshold and model make a judge configuration, preflighted "
    "on the calibration set before it scores production traffic. Production has no expected answer: the judge "
    "judges by these criteria."
)


class OnlineEvaluatorForm(DatasetSettingsForm):
    # Set to None: the dataset form's fields an evaluator has no use for (no expected answer, no repeats).
    number_of_requests = None
    alignment_examples = None
    jaccard_enabled = None
    vector_enabled = None
    context_gates = None

    name = forms.CharField(max_length=120)
    enabled = forms.BooleanField(required=False, initial=True, label="Enabled")
    scope = forms.ChoiceField(choices=OnlineEvaluator.Scope.choices, initial=OnlineEvaluator.Scope.TRACE)
    idle_minutes = forms.IntegerField(
        min_value=1, max_value=10_080, initial=30, help_text="A conversation is scored once idle this long."
    )
    sampling_percent = forms.FloatField(
        min_value=0, max_value=100, initial=10, label="Sampling rate (%)", help_text="Share of matching traces scored."
    )
    daily_cost_cap = forms.DecimalField(
        required=False, min_value=Decimal(0), max_digits=12, decimal_places=2, label="Daily cost cap (USD)",
        help_text="Judging stops for the day once this is spent. Empty: no cap.",
    )  # fmt: skip
    service = forms.CharField(required=False, max_length=200, help_text="Only traces of this service.name.")
    # Not named "attributes": a form control of that name would hide the form element's own
    # `attributes` property from every script on the page (DOM clobbering).
    attribute_filters = forms.CharField(
        required=False,
        label="Attributes",
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="One per line: key=value (equals) or key~value (contains), e.g. deployment.environment=prod.",
    )
    tags = forms.CharField(required=False, help_text="Comma-separated; the trace has every one.")
    feedback = forms.ChoiceField(
        required=False,
        choices=[("", "Any or none")] + [(value, f"{value.capitalize()} feedback") for value in FEEDBACK_CHOICES],
        label="User feedback",
    )
    latency_over_ms = forms.IntegerField(required=False, min_value=1, label="Slower than (ms)")
    errors_only = forms.BooleanField(required=False, label="Errors only")
    alert_below_percent = forms.FloatField(
        required=False, min_value=0, max_value=100, label="Alert below pass rate (%)",
        help_text="Empty: no alert.",
    )  # fmt: skip
    alert_window = forms.IntegerField(min_value=1, max_value=1000, initial=20, label="over the last N scored")
    alert_webhook = forms.URLField(required=False, max_length=500, assume_scheme="https", label="Alert webhook")
    alert_email = forms.EmailField(required=False, label="Alert email")

    field_order = [
        "name", "enabled", "scope", "idle_minutes", "sampling_percent", "daily_cost_cap",
        "service", "attribute_filters", "tags", "feedback", "latency_over_ms", "errors_only",
        *SCORING_KEYS,
        "alert_below_percent", "alert_window", "alert_webhook", "alert_email",
    ]  # fmt: skip
    RULE_FIELDS = ("name", "enabled", "scope", "idle_minutes", "sampling_percent", "daily_cost_cap")
    FILTER_FIELDS = ("service", "attribute_filters", "tags", "feedback", "latency_over_ms", "errors_only")
    # The filters' keys (monitoring/online/filters.py) of the fields whose name differs.
    FILTER_KEYS = {"attribute_filters": "attributes"}
    ALERT_FIELDS = ("alert_below_percent", "alert_window", "alert_webhook", "alert_email")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["pass_threshold"].initial = DEFAULT_PASS_THRESHOLD

    def fieldsets(self) -> list[tuple[str, str, list[forms.BoundField]]]:
        """(legend, help, bound fields) for each part of the page's form."""
        parts = [
            ("Rule", "", self.RULE_FIELDS),
            ("Which traces", "All conditions must hold; leave a field empty for no condition.", self.FILTER_FIELDS),
            ("Judge", JUDGE_HELP, SCORING_KEYS),
            ("Alert", "", self.ALERT_FIELDS),
        ]
        return [(legend, text, [self[name] for name in names]) for legend, text, names in parts]

    def clean_attribute_filters(self) -> list[dict[str, str]]:
        conditions = []
        for number, line in enumerate(self.cleaned_data["attribute_filters"].splitlines(), 1):
            if not line.strip():
                continue
            op = "contains" if "~" in line and ("=" not in line or line.index("~") < line.index("=")) else "equals"
            key, _, value = line.partition("~" if op == "contains" else "=")
            if not key.strip() or not _:
                raise forms.ValidationError(f"Line {number}: write key=value or key~value, not “{line.strip()}”.")
            conditions.append({"key": key.strip(), "op": op, "value": value.strip()})
        return conditions

    def settings(self) -> dict[str, Any]:
        """The cleaned form as monitoring.online.services takes it."""
        data = self.cleaned_data
        return {
            "name": data["name"],
            "enabled": data["enabled"],
            "scope": data["scope"],
            "idle_minutes": data["idle_minutes"],
            "sampling_rate": data["sampling_percent"] / 100,
            "daily_cost_cap": data["daily_cost_cap"],
            "filters": {self.FILTER_KEYS.get(name, name): data[name] for name in self.FILTER_FIELDS},
            "scoring": {name: data[name] for name in SCORING_KEYS if data.get(name) not in (None, "")},
            "alert_below": None if data["alert_below_percent"] is None else data["alert_below_percent"] / 100,
            "alert_window": data["alert_window"],
            "alert_webhook": data["alert_webhook"],
            "alert_email": data["alert_email"],
        }

    @classmethod
    def for_evaluator(cls, evaluator: OnlineEvaluator, data: Any = None) -> OnlineEvaluatorForm:
        filters = evaluator.filters or {}
        initial: dict[str, Any] = {
            "name": evaluator.name,
            "enabled": evaluator.enabled,
            "scope": evaluator.scope,
            "idle_minutes": evaluator.idle_minutes,
            "sampling_percent": round(evaluator.sampling_rate * 100, 4),
            "daily_cost_cap": evaluator.daily_cost_cap,
            "service": filters.get("service", ""),
            "attribute_filters": "\n".join(
                f"{c['key']}{'~' if c['op'] == 'contains' else '='}{c['value']}" for c in filters.get("attributes", [])
            ),
            "tags": ", ".join(filters.get("tags", [])),
            "feedback": filters.get("feedback", ""),
            "latency_over_ms": filters.get("latency_over_ms"),
            "errors_only": filters.get("errors_only", False),
            "alert_below_percent": None if evaluator.alert_below is None else round(evaluator.alert_below * 100, 4),
            "alert_window": evaluator.alert_window,
            "alert_webhook": evaluator.alert_webhook,
            "alert_email": evaluator.alert_email,
        }
        initial |= {name: (evaluator.scoring or {}).get(name) for name in SCORING_KEYS}
        if initial["pass_threshold"] is None:
            initial["pass_threshold"] = DEFAULT_PASS_THRESHOLD
        return cls(data, initial=initial)
