from decimal import Decimal
from typing import Any

from django import forms
from django.contrib.auth import password_validation
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.models import User

from accounts.models import ApiToken, Membership, Team


class LoginForm(AuthenticationForm):
    """Django's authentication form with the autocomplete hints browsers expect."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["username"].widget.attrs.update({"autocomplete": "username", "autocapitalize": "none"})
        self.fields["password"].widget.attrs.update({"autocomplete": "current-password"})


class TeamForm(forms.Form):
    name = forms.CharField(max_length=Team._meta.get_field("name").max_length, label="Team name")

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if not name:
            raise forms.ValidationError("Enter a team name.")
        return name


class TeamBudgetForm(forms.Form):
    """The team's budgets in USD; empty means none."""

    run_budget = forms.DecimalField(
        required=False, min_value=Decimal("0.01"), max_digits=12, decimal_places=2, label="Default cost cap per run"
    )
    monthly_budget = forms.DecimalField(
        required=False, min_value=Decimal("0.01"), max_digits=12, decimal_places=2, label="Monthly budget"
    )


class MemberAddForm(forms.Form):
    username = forms.CharField(max_length=150, label="Username")
    role = forms.ChoiceField(choices=Membership.Role.choices, initial=Membership.Role.MEMBER)


class MemberCreateForm(forms.Form):
    username = forms.CharField(
        max_length=150,
        validators=[User.username_validator],
        help_text="Letters, digits and @ . + - _ only.",
    )
    email = forms.EmailField(required=False, label="Email (optional)")
    password = forms.CharField(
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
        help_text="At least 8 characters; share it with them privately.",
    )
    role = forms.ChoiceField(choices=Membership.Role.choices, initial=Membership.Role.MEMBER)

    def clean(self) -> dict:
        cleaned = super().clean() or {}
        password = cleaned.get("password")
        if password:
            candidate = User(username=cleaned.get("username", ""), email=cleaned.get("email", ""))
            try:
                password_validation.validate_password(password, candidate)
            except forms.ValidationError as error:
                self.add_error("password", error)
        return cleaned


class MemberRoleForm(forms.Form):
    role = forms.ChoiceField(choices=Membership.Role.choices)


class ApiTokenForm(forms.Form):
    name = forms.CharField(
        max_length=ApiToken._meta.get_field("name").max_length,
        label="Token name",
        help_text="Where it will be used, e.g. “CI pipeline” or “my laptop”.",
    )

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if not name:
            raise forms.ValidationError("Enter a name for the token.")
        return name


class SwitchTeamForm(forms.Form):
    team = forms.IntegerField(min_value=1)
