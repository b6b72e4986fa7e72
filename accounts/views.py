"""Sign-in, the settings page (team, members, API tokens, model) and team switching."""

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login as auth_login
from django.contrib.auth import logout as auth_logout
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HTMX_STOP_POLLING, trigger_client_event

from accounts import selectors, services
from accounts.forms import (
    ApiTokenForm,
    LoginForm,
    MemberAddForm,
    MemberCreateForm,
    MemberRoleForm,
    SwitchTeamForm,
    TeamBudgetForm,
    TeamForm,
)
from accounts.middleware import SESSION_KEY
from accounts.models import Membership, Team
from accounts.throttling import (
    client_ip,
    known_device,
    known_device_remember,
    login_failure_record,
    login_is_throttled,
    login_success_reset,
    throttle_message,
)
from evalsite import llm
from evalsite.http import AuthedRequest, is_partial, navigate

# ---- sign in / out -------------------------------------------------------------


def _next_url(request: AuthedRequest) -> str:
    target = request.POST.get("next") or request.GET.get("next") or ""
    if url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        return target
    return reverse(settings.LOGIN_REDIRECT_URL)


@sensitive_post_parameters("password")
@never_cache
@require_http_methods(["GET", "POST"])
def login(request: AuthedRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect(_next_url(request))
    form = LoginForm(request, data=request.POST if request.method == "POST" else None)
    throttled = None
    if request.method == "POST":
        username, ip = request.POST.get("username", ""), client_ip(request)
        device = known_device(request, username)  # a browser that signed in as this user before
        # Refuse before checking the password, so a throttled guesser learns nothing.
        if login_is_throttled(username=username, ip=ip, device=device):
            throttled = throttle_message()
        elif form.is_valid():
            auth_login(request, form.get_user())
            login_success_reset(username=username, ip=ip, device=device)
            response = redirect(_next_url(request))
            known_device_remember(response, username=username, device=device)
            return response
        else:
            login_failure_record(username=username, ip=ip, device=device)
    context = {"form": form, "next": request.POST.get("next") or request.GET.get("next", ""), "throttled": throttled}
    return render(request, "accounts/login.html", context, status=429 if throttled else 200)


@require_POST
def logout(request: AuthedRequest) -> HttpResponse:
    auth_logout(request)
    messages.info(request, "You have signed out.")
    return redirect("accounts:login")


# ---- settings page -------------------------------------------------------------


def _model_info() -> dict[str, Any]:
    """What the gateway will use. The API key itself is never put in a page."""
    return {
        "llm": llm.model_for("llm"),
        "judge": llm.model_for("judge"),
        "judge_is_fallback": not settings.EVALSITE_JUDGE_MODEL and bool(settings.EVALSITE_LLM_MODEL),
        "embedding": llm.model_for("embedding"),
        "api_base": settings.EVALSITE_LLM_API_BASE,
        "api_key_set": bool(settings.EVALSITE_LLM_API_KEY),
        "timeout": settings.EVALSITE_LLM_TIMEOUT,
        "retries": settings.EVALSITE_LLM_RETRIES,
        "retry_timeouts": settings.EVALSITE_LLM_RETRY_TIMEOUTS,
        "concurrency": settings.EVALSITE_LLM_CONCURRENCY,
    }


def _model_tests() -> dict[str, Any]:
    return selectors.model_test_summary()


def _settings_context(request: AuthedRequest, **overrides: Any) -> dict[str, Any]:
    team = request.team
    assert team is not None
    me = selectors.user_membership(user=request.user, team=team)
    return {
        "team": team,
        "me": me,
        "is_owner": me is not None and me.role == Membership.Role.OWNER,
        "members": selectors.membership_list(team=team),
        "roles": Membership.Role.choices,
        "tokens": selectors.api_token_list(user=request.user),
        "team_form": TeamForm(initial={"name": team.name}),
        "budget_form": TeamBudgetForm(initial={"run_budget": team.run_budget, "monthly_budget": team.monthly_budget}),
        "add_form": MemberAddForm(),
        "create_form": MemberCreateForm(),
        "add_mode": "existing",
        "token_form": ApiTokenForm(),
        "new_team_form": TeamForm(prefix="new"),
        "new_token": None,
        "model": _model_info(),
        **_model_tests(),
        **overrides,
    }


def _render_settings(request: AuthedRequest, section: str | None = None, **overrides: Any) -> HttpResponse:
    """The whole page, or just one section (its partial) for htmx requests."""
    template = "accounts/settings.html"
    if section and is_partial(request):
        template = f"accounts/settings.html#{section}"
    return render(request, template, _settings_context(request, **overrides))


def _render_first_team(request: AuthedRequest, form: TeamForm) -> HttpResponse:
    return render(request, "accounts/team_first.html", {"form": form})


@login_required
@require_GET
def settings_page(request: AuthedRequest) -> HttpResponse:
    if request.team is None:
        return _render_first_team(request, TeamForm(prefix="new"))
    return _render_settings(request)


@login_required
@require_POST
def model_test(request: AuthedRequest) -> HttpResponse:
    """Test connection: queue a few short calls to each configured model (a job: the calls
    outlast a web request); the Model section polls until it shows what they found."""
    from evalsite.llm.probe import model_test_start

    if request.team is None:
        return redirect("accounts:settings")
    if llm.is_configured("llm"):
        model_test_start()
    if not request.htmx:
        return redirect(f"{reverse('accounts:settings')}#model")
    return _render_settings(request, section="model_section")


@login_required
@require_GET
def model_test_status(request: AuthedRequest) -> HttpResponse:
    """The Model section while a test runs (it polls this every 3 s); 286 once the findings are in."""
    from evalsite.llm.probe import model_test_running

    if request.team is None or not request.htmx or request.htmx.history_restore_request:
        return redirect(f"{reverse('accounts:settings')}#model")
    response = _render_settings(request, section="model_section")
    if not model_test_running():
        response.status_code = HTMX_STOP_POLLING
    return response


def _toast(response: HttpResponse, message: str, level: str = "success") -> HttpResponse:
    return trigger_client_event(response, "toast", {"message": message, "level": level})


def _done(request: AuthedRequest, section: str, message: str) -> HttpResponse:
    """After a successful change: swap the section (htmx) or redirect back (plain form)."""
    if request.htmx:
        return _toast(_render_settings(request, section), message)
    messages.success(request, message)
    return redirect(reverse("accounts:settings") + f"#{section.removesuffix('_section')}")


# ---- teams ---------------------------------------------------------------------


@login_required
@require_POST
def team_create(request: AuthedRequest) -> HttpResponse:
    form = TeamForm(request.POST, prefix="new")
    if not form.is_valid():
        if request.team is None:
            return _render_first_team(request, form)
        return _render_settings(request, new_team_form=form, open_dialog="new-team-dialog")
    team = services.team_create(user=request.user, name=form.cleaned_data["name"])
    request.session[SESSION_KEY] = team.pk
    messages.success(request, f"Team “{team.name}” created. You are its owner.")
    return redirect("accounts:settings")


@login_required
@require_POST
def switch_team(request: AuthedRequest) -> HttpResponse:
    form = SwitchTeamForm(request.POST)
    team_id = form.cleaned_data["team"] if form.is_valid() else None
    if team_id is None:
        raise Http404("No such team")
    # Only teams the user belongs to: anything else is a 404, like every other object.
    team = get_object_or_404(Team.objects.filter(memberships__user=request.user), pk=team_id)
    request.session[SESSION_KEY] = team.pk
    messages.success(request, f"Switched to {team.name}.")
    return navigate(request, reverse("agents:list"))


def _get_team_for_owner(request: AuthedRequest) -> Team:
    team = request.team
    if team is None:
        raise Http404("No current team")
    me = selectors.user_membership(user=request.user, team=team)
    if me is None or me.role != Membership.Role.OWNER:
        raise PermissionDenied("Only team owners can manage the team.")
    return team


@login_required
@require_POST
def team_update(request: AuthedRequest) -> HttpResponse:
    team = _get_team_for_owner(request)
    form = TeamForm(request.POST)
    if not form.is_valid():
        return _render_settings(request, "team_section", team_form=form)
    services.team_update(team=team, name=form.cleaned_data["name"])
    return _done(request, "team_section", "Team renamed.")


@login_required
@require_POST
def team_budgets(request: AuthedRequest) -> HttpResponse:
    team = _get_team_for_owner(request)
    form = TeamBudgetForm(request.POST)
    if not form.is_valid():
        return _render_settings(request, "budgets_section", budget_form=form)
    services.team_budgets_update(
        team=team, run_budget=form.cleaned_data["run_budget"], monthly_budget=form.cleaned_data["monthly_budget"]
    )
    return _done(request, "budgets_section", "Budgets saved.")


@login_required
@require_POST
def member_add(request: AuthedRequest) -> HttpResponse:
    team = _get_team_for_owner(request)
    mode = "new" if request.POST.get("mode") == "new" else "existing"
    form: MemberAddForm | MemberCreateForm = (MemberCreateForm if mode == "new" else MemberAddForm)(request.POST)
    if form.is_valid():
        try:
            if mode == "new":
                membership = services.membership_create_user(team=team, **form.cleaned_data)
            else:
                membership = services.membership_add(team=team, **form.cleaned_data)
        except ValidationError as error:
            form.add_error(None, error)
        else:
            return _done(request, "team_section", f"{membership.user.username} joined {team.name}.")
    form_key = "create_form" if mode == "new" else "add_form"
    return _render_settings(request, "team_section", add_mode=mode, **{form_key: form})


def _get_membership_for_user(request: AuthedRequest, membership_id: int) -> Membership:
    if request.team is None:
        raise Http404("No current team")
    return selectors.membership_get(team=request.team, membership_id=membership_id)


@login_required
@require_POST
def member_role(request: AuthedRequest, membership_id: int) -> HttpResponse:
    membership = _get_membership_for_user(request, membership_id)
    _get_team_for_owner(request)
    form = MemberRoleForm(request.POST)
    try:
        if not form.is_valid():
            raise ValidationError("Choose owner or member.")
        services.membership_set_role(membership=membership, role=form.cleaned_data["role"])
    except ValidationError as error:
        return _refused(request, " ".join(error.messages))
    return _done(request, "team_section", f"{membership.user.username} is now {membership.get_role_display().lower()}.")


@login_required
@require_POST
def member_remove(request: AuthedRequest, membership_id: int) -> HttpResponse:
    membership = _get_membership_for_user(request, membership_id)
    leaving = membership.user_id == request.user.pk
    if not leaving:  # anyone may leave; only owners remove others
        _get_team_for_owner(request)
    try:
        services.membership_remove(membership=membership)
    except ValidationError as error:
        return _refused(request, " ".join(error.messages))
    if leaving:
        request.session.pop(SESSION_KEY, None)
        messages.success(request, f"You left {membership.team.name}.")
        url = reverse("accounts:settings")
        return navigate(request, url)
    return _done(request, "team_section", f"{membership.user.username} was removed from {membership.team.name}.")


def _refused(request: AuthedRequest, message: str) -> HttpResponse:
    """A rule said no (e.g. the last owner): show why, change nothing."""
    if request.htmx:
        return _toast(_render_settings(request, "team_section"), message, "error")
    messages.error(request, message)
    return redirect(reverse("accounts:settings") + "#team")


# ---- API tokens ----------------------------------------------------------------


@login_required
@require_POST
def token_create(request: AuthedRequest) -> HttpResponse:
    if request.team is None:
        raise Http404("No current team")
    form = ApiTokenForm(request.POST)
    if not form.is_valid():
        return _render_settings(request, "tokens_section", token_form=form)
    token, raw = services.api_token_create(user=request.user, name=form.cleaned_data["name"])
    # The raw token is rendered in this response only; it is never stored or shown again.
    # No toast: the alert with the token and its Copy button says it, and a toast sat on top
    # of that button on small screens.
    return _render_settings(request, "tokens_section", new_token=raw, new_token_obj=token)


@login_required
@require_POST
def token_revoke(request: AuthedRequest, token_id: int) -> HttpResponse:
    token = selectors.api_token_get_for_user(user=request.user, token_id=token_id)
    services.api_token_revoke(token=token)
    return _done(request, "tokens_section", f"Token “{token.name}” revoked. It no longer works.")


# ---- site-wide notices ------------------------------------------------------------


@login_required
@require_POST
def banner_dismiss(request: AuthedRequest) -> HttpResponse:
    """Hide a notice (e.g. "No model is configured") for this user; htmx removes it in place."""
    try:
        services.banner_dismiss(user=request.user, banner=request.POST.get("banner", ""))
    except ValidationError as error:
        return HttpResponse(" ".join(error.messages), status=400, content_type="text/plain")
    if request.htmx:
        return HttpResponse("")
    return redirect(_next_url(request))
