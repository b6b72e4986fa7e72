"""Settings come from the environment only. Each case loads them in a fresh Python
process with a controlled environment, exactly as a server start would."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
SETTINGS_FILE = ROOT / "evalsite" / "settings.py"
PRODUCTION = {
    "DEBUG": "false",
    "SECRET_KEY": "x7Qm2v9LkR4tZp8WcN3bYh6JdF1sGa5Ue0XoVi7TqKyMwE2rPj4Hs8Ln",
    "SECURE_SSL": "true",
    "ALLOWED_HOSTS": "evalsite.example.com",
    "CSRF_TRUSTED_ORIGINS": "https://evalsite.example.com",
}


def _setting_names() -> set[str]:
    """Every variable settings.py reads through its env_* helpers."""
    return set(re.findall(r'env_\w+\(\s*"([A-Z0-9_]+)"', SETTINGS_FILE.read_text()))


def _clean_env(**overrides: str) -> dict[str, str]:
    """This process's environment without any setting (the test run sets some), plus overrides."""
    names = _setting_names()
    env = {k: v for k, v in os.environ.items() if k not in names and k.removesuffix("_FILE") not in names}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    # Set for the whole test process once the browser tests are collected; never in production.
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    return {**env, **overrides}


def _load(expression: str, **env: str) -> object:
    """Evaluate an expression over the settings module in a new process."""
    code = f"import json; from evalsite import settings as s; print(json.dumps({expression}, default=str))"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=_clean_env(**env), capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _deploy_check(**env: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"]
    return subprocess.run(command, cwd=ROOT, env=_clean_env(**env), capture_output=True, text=True, timeout=120)


def test_without_database_url_the_database_is_sqlite_in_var():
    database = _load("s.DATABASES['default']")

    assert database["ENGINE"] == "django.db.backends.sqlite3"
    assert database["NAME"] == str(ROOT / "var" / "evalsite.sqlite3")


def test_database_url_selects_postgresql():
    database = _load("s.DATABASES['default']", DATABASE_URL="postgres://evalsite:pw@db.internal:5433/evalsite")

    assert database["ENGINE"] == "django.db.backends.postgresql"
    assert (database["HOST"], database["PORT"], database["NAME"], database["USER"]) == (
        "db.internal",
        5433,
        "evalsite",
        "evalsite",
    )


def test_postgresql_ends_a_transaction_its_client_left_idle():
    # A worker host cut off from the network mid-save leaves its transaction open, holding its
    # run's row lock: every worker saving a case of that run, and the reaper, would wait on it
    # until TCP gave up (hours). PostgreSQL ends such a session after the timeout (issue 37).
    url = "postgres://evalsite:pw@db.internal:5433/evalsite"
    options = "s.DATABASES['default'].get('OPTIONS', {})"
    default = _load(options, DATABASE_URL=url)
    chosen = _load(options, DATABASE_URL=url, DATABASE_IDLE_IN_TRANSACTION_TIMEOUT="7")
    off = _load(options, DATABASE_URL=url, DATABASE_IDLE_IN_TRANSACTION_TIMEOUT="0")

    assert default["options"] == "-c idle_in_transaction_session_timeout=20000"
    assert chosen["options"] == "-c idle_in_transaction_session_timeout=7000"
    assert "options" not in off


def test_without_redis_url_celery_and_clients_use_the_embedded_socket():
    broker, client = _load("[s.CELERY_BROKER_URL, s.REDIS_CLIENT_URL]")

    socket = ROOT / "var" / "redis.sock"
    assert broker == f"redis+socket://{socket}"
    assert client == f"unix://{socket}"


def test_redis_url_is_used_by_celery_and_clients():
    broker, client = _load("[s.CELERY_BROKER_URL, s.REDIS_CLIENT_URL]", REDIS_URL="redis://cache.internal:6379/2")

    assert broker == client == "redis://cache.internal:6379/2"


def test_booleans_accept_only_clear_values():
    assert _load("s.DEBUG", DEBUG="yes") is True
    assert _load("s.DEBUG", DEBUG="0") is False

    result = subprocess.run(
        [sys.executable, "-c", "import evalsite.settings"],
        cwd=ROOT, env=_clean_env(DEBUG="maybe"), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode != 0
    assert "DEBUG must be a boolean" in result.stderr


def test_secrets_can_come_from_files(tmp_path):
    secret = tmp_path / "secret_key"
    secret.write_text("k3y-from-a-docker-secret\n")

    assert _load("s.SECRET_KEY", SECRET_KEY_FILE=str(secret)) == "k3y-from-a-docker-secret"


def test_celery_redelivers_instead_of_losing_or_duplicating_work():
    assert settings.CELERY_TASK_ACKS_LATE is True
    assert settings.CELERY_TASK_REJECT_ON_WORKER_LOST is True
    assert settings.CELERY_WORKER_PREFETCH_MULTIPLIER == 1
    assert settings.CELERY_TASK_SOFT_TIME_LIMIT < settings.CELERY_TASK_TIME_LIMIT
    # A task still running when the visibility timeout ends would be handed to a second worker.
    assert settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"] > settings.CELERY_TASK_TIME_LIMIT


def test_every_setting_is_documented_in_env_example():
    documented = set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]+)=", (ROOT / ".env.example").read_text(), re.MULTILINE))

    assert _setting_names() - documented == set()


def test_the_deploy_checks_fail_on_unsafe_production_settings():
    unsafe = {**PRODUCTION, "DEBUG": "true", "SECURE_SSL": "false"}
    del unsafe["SECRET_KEY"]  # the built-in development key

    result = _deploy_check(**unsafe)

    assert result.returncode != 0
    assert "security.W018" in result.stderr  # DEBUG
    assert "security.W009" in result.stderr  # the development SECRET_KEY
    assert "security.W008" in result.stderr  # no HTTPS redirect


def test_production_settings_pass_the_deploy_checks():
    result = _deploy_check(**PRODUCTION)

    assert result.returncode == 0, result.stderr


def test_an_empty_variable_keeps_the_default():
    media_root, secret_key = _load("[s.MEDIA_ROOT, s.SECRET_KEY]", MEDIA_ROOT="", SECRET_KEY="")

    assert media_root == str(ROOT / "var" / "media")
    assert secret_key.startswith("django-insecure-")


def test_site_url_defaults_to_the_address_the_stack_serves():
    """`make run PORT=8001` must not link to port 8000 (exports, reports, http agents' document links)."""
    assert _load("[s.SITE_URL, s.SITE_URL_EXPLICIT]") == ["http://127.0.0.1:8000", False]
    assert _load("s.SITE_URL", PORT="8001") == "http://127.0.0.1:8001"
    assert _load("s.SITE_URL", HOST="0.0.0.0", PORT="9000") == "http://127.0.0.1:9000"
    assert _load("s.SITE_URL", HOST="::1", PORT="9000") == "http://[::1]:9000"
    explicit = _load("[s.SITE_URL, s.SITE_URL_EXPLICIT]", SITE_URL="https://evalsite.example.com/", PORT="8001")
    assert explicit == ["https://evalsite.example.com", True]
