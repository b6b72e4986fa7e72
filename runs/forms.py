"""Input validation for the run pages (the views hand cleaned data to services and selectors)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Literal

from django import forms

from agents.models import Agent, AgentVersion
from evalsite import paging
from evalsite.paging import MAX_OFFSET
from runs.models import JudgeConfig, Run
from runs.selectors import FILTERS, SORTS


class RerunForm(forms.Form):
    """Re-run failed and errored cases, with the run's agent version or another one."""

    version = forms.ModelChoiceField(
        queryset=AgentVersion.objects.none(),
        required=False,
        empty_label="The run's own version",
        label="Agent version",
    )
    request_key = forms.CharField(required=False, max_length=64)

    def __init__(self, *args: Any, agent: Agent, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["version"]
        assert isinstance(field, forms.ModelChoiceField)
        field.queryset = agent.versions.order_by("-number")
        # Per-instance label (it needs the agent); the stubs only know the method, hence the ignore.
        field.label_from_instance = lambda obj: (  # type: ignore[method-assign]
            f"Version {obj.number}" + (" (current)" if obj.pk == agent.current_version_id else "")
        )


class RescoreForm(forms.Form):
    """Judge a run's answers again: with the dataset's current settings, or a configuration of its
    dataset by number. The page offers the current settings and the run's own judge (known without a
    query, which keeps the run page within its query budget); the API takes any number."""

    judge_config = forms.TypedChoiceField(coerce=int, empty_value=None, required=False, label="Judge")
    request_key = forms.CharField(required=False, max_length=64)

    def __init__(self, *args: Any, run: Run, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.run = run
        choices: list[tuple[Any, str]] = [("", "Current dataset settings")]
        if run.judge_config is not None and run.dataset_id:
            choices.append(
                (
                    run.judge_config.number,
                    f"{run.judge_config.label} (this run's judge) · fingerprint {run.judge_config.short_fingerprint}",
                )
            )
        field = self.fields["judge_config"]
        assert isinstance(field, forms.TypedChoiceField)
        field.choices = choices
        field.error_messages["invalid_choice"] = "Pick a judge configuration of this run's dataset."

    def clean_judge_config(self) -> JudgeConfig | None:
        number = self.cleaned_data.get("judge_config")
        if number is None:
            return None
        dataset_id = self.run.dataset_id
        config = JudgeConfig.objects.filter(dataset_id=dataset_id, number=number).first() if dataset_id else None
        if config is None:
            raise forms.ValidationError("Pick a judge configuration of this run's dataset.")
        return config


class ResultViewForm(forms.Form):
    """The result list's filter, order and page; anything unknown falls back to the default."""

    filter = forms.ChoiceField(choices=list(FILTERS.items()), required=False)
    sort = forms.ChoiceField(choices=list(SORTS.items()), required=False)
    # Bounded: past 2**63 the database refuses the number (a 500); past MAX_OFFSET the view is the default.
    after = forms.IntegerField(min_value=0, max_value=MAX_OFFSET, required=False)
    offset = forms.IntegerField(min_value=0, max_value=MAX_OFFSET, required=False)
    upto = forms.IntegerField(min_value=0, max_value=MAX_OFFSET, required=False)
    seen = forms.CharField(required=False, max_length=20_000)
    expand = forms.BooleanField(required=False)  # every card open ("Expand all")

    def view(self) -> dict[str, Any]:
        data = self.cleaned_data if self.is_valid() else {}
        return {
            "filter": data.get("filter") or "all",
            "sort": data.get("sort") or "position",
            "after": data.get("after") or 0,
            "offset": data.get("offset") or 0,
            "upto": data.get("upto"),
            "seen": data.get("seen") or "",
            # "1" or "", so the query tag keeps it in links only when set.
            "expand": "1" if data.get("expand") else "",
        }


class CompareForm(forms.Form):
    """Two runs of the agent: A (before) and B (after)."""

    a = forms.ModelChoiceField(queryset=Run.objects.none(), label="Before (A)")
    b = forms.ModelChoiceField(queryset=Run.objects.none(), label="After (B)")

    def __init__(self, *args: Any, agent: Agent, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        runs = Run.objects.filter(agent=agent).select_related("agent_version")
        for name in ("a", "b"):
            field = self.fields[name]
            assert isinstance(field, forms.ModelChoiceField)
            field.queryset = runs
            field.error_messages["invalid_choice"] = "Pick a run of this agent."

    def clean(self) -> dict[str, Any]:
        from runs.comparing.comparison import runs_share_dataset

        data = super().clean() or {}
        a, b = data.get("a"), data.get("b")
        if a and b and a.pk == b.pk:
            raise forms.ValidationError("Pick two different runs.")
        if a and b and not runs_share_dataset(a, b):
            raise forms.ValidationError(
                f"Run #{a.pk} is of “{a.dataset_name}” and run #{b.pk} of “{b.dataset_name}”: "
                "pick two runs of the same dataset."
            )
        return data


class _RunChoices(forms.ModelMultipleChoiceField):
    """Run ids; one the database cannot hold is no run of the agent (its `pk__in` query would fail)."""

    def clean(self, value: Any) -> Any:
        values = value if isinstance(value, list | tuple) else [value]
        if any(str(item).strip().isdigit() and not paging.in_range(int(item)) for item in values if item):
            raise forms.ValidationError(self.error_messages["invalid_choice"], code="invalid_choice")
        return super().clean(value)


class MatrixForm(forms.Form):
    """Two to five runs of one dataset of the agent, for the cases x runs matrix."""

    runs = _RunChoices(queryset=Run.objects.none(), label="Runs")

    def __init__(self, *args: Any, agent: Agent, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["runs"]
        assert isinstance(field, forms.ModelMultipleChoiceField)
        field.queryset = Run.objects.filter(agent=agent).select_related("agent_version")
        field.error_messages["invalid_pk_value"] = "Pick runs of this agent."
        field.error_messages["invalid_choice"] = "Pick runs of this agent."

    def clean_runs(self) -> list[Run]:
        from runs.comparing.comparison import runs_share_dataset
        from runs.comparing.matrix import MAX_RUNS

        runs = list(self.cleaned_data["runs"])
        if not 2 <= len(runs) <= MAX_RUNS:
            raise forms.ValidationError(f"Pick between 2 and {MAX_RUNS} runs (you picked {len(runs)}).")
        if any(not runs_share_dataset(runs[0], run) for run in runs[1:]):
            raise forms.ValidationError("Pick runs of the same dataset.")
        return runs


BUDGET_CAP_MIN = Decimal("0.000001")


class RunStartForm(forms.Form):
    """The start dialog: a one-time key, the run's cost cap (blank: no cap), and whether to start
    with a judge that failed its preflight."""

    request_key = forms.CharField(required=False, max_length=64)
    # To the millionth of a dollar, as Run.budget_cap keeps it: a small run on a cheap model
    # costs less than a cent, and a cap of $0.005 is a real cap for it.
    budget_cap = forms.DecimalField(
        required=False,
        min_value=BUDGET_CAP_MIN,
        max_digits=12,
        decimal_places=6,
        label="Stop the run when it has cost (USD)",
        error_messages={
            "min_value": "Enter a cap above $0 (such as 0.005 or 2.50), or leave it empty for no cap.",
            "max_decimal_places": "Enter a cap to at most 6 decimal places (a millionth of a dollar).",
        },
    )
    # Shown once the judge failed its preflight: start anyway, the run marked so.
    allow_failed_preflight = forms.BooleanField(required=False)

    def cap(self) -> Decimal | None | Literal["team"]:
        """The cap asked for; "team" (the team's default) when the form did not send the field."""
        return self.cleaned_data["budget_cap"] if "budget_cap" in self.data else "team"
