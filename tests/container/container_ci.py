"""The container a team deploys, built and run as a user would (`make test-container`; .ci/run).

Not a pytest test: it needs root (a Docker daemon of its own, Debian packages) and takes minutes.

1. Docker, docker-compose (Debian's 1.29) and debootstrap from Debian's packages when missing;
   a private daemon (vfs storage, no iptables, no default bridge: what these machines allow) with
   its own data root and socket.
2. The base image: the official python:3.11-slim when it can be pulled; otherwise a Debian
   bookworm made here with debootstrap and `docker import` (no registry is reachable from CI).
3. The project's Dockerfile built unchanged on that base as `evalsite:latest` (the image
   docker-compose.yml runs), its size and the build time printed and held to budgets.
4. docker-compose.yml started as docs/deploy.md says, in a folder of its own with a `.env` made
   from .env.example (tests/container/compose_stack.py says what its override changes): migrate
   (one-shot), web, worker (the shipped concurrency 4), beat, postgres and redis (CI's stand-ins
   from Debian's packages when the official images cannot be pulled); the first admin user;
   `check --deploy` inside the container; deploy/nginx.conf as the TLS proxy in front of web.
5. From outside, over HTTPS through that proxy only: /healthz, a static file, sign-in, a team,
   an llm agent pointed at the project's fake model server, an API token, a dataset imported
   through the API, a run started and waited for, every result checked against what the fake
   server saw; web and worker not root; an uploaded document still served after web's container
   is recreated (the media volume); `--scale worker=2` and a run on the scaled stack.
6. Operations: a backup (pg_dump, the media volume), `down -v`, the restore into a new stack,
   every result and the document back; an upgrade (the database one migration behind, as an
   older release left it; `up -d` applies it through the one-shot migrate service).
7. `docker-compose config` accepting docker-compose.yml with .env.example's values; everything
   stopped and the daemon's data removed.

Usage (as root, from the repository): .venv/bin/python tests/container/container_ci.py
"""

from __future__ import annotations

import contextlib
import http.cookiejar
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.container.compose_stack import (  # noqa: E402
    ADMIN_PASSWORD,
    DOCKER,
    GATEWAY,
    HTTP_PORT,
    SERVICES_IMAGE,
    SITE,
    WEB_PORT,
    Project,
    StackFailure,
    log,
    start_proxy,
    wait_for,
)
from tests.fakellm import FakeLLM  # noqa: E402
from tests.runs.preflight_helpers import fit_judge  # noqa: E402

OFFICIAL_BASE = "python:3.11-slim"
OFFICIAL_SERVICES = ("postgres:16-alpine", "redis:7-alpine")  # docker-compose.yml's
LOCAL_BASE = "evalsite-base:bookworm"
IMAGE = "evalsite:latest"  # docker-compose.yml's `image:`
# "-755": the tarball's root directory is mode 755 (an earlier one kept mkdtemp's 700, so the
# image's non-root user could not reach /bin/sh); a cache of that kind is not reused.
BASE_CACHE = Path("/var/cache/evalsite-ci/bookworm-python-755.tar")
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
CASES = 6
PREVIOUS_MIGRATION = ("datasets", "0010_merge_context_gates_and_rule_map")  # the upgrade starts one behind
BUILD_BUDGET_SECONDS = 600
# The budget is the whole image under 500 MB on the official python:3.11-slim. CI cannot
# pull that base; its own debootstrap base (169 MB) is larger, so the image built on it must stay
# under 500 MB too. What Evalsite adds on top of its base: 315 MB on 2026-12-06 (291 MB of virtual
# environment, 8 MB of collected static files, 13 MB of byte-code; docs/deploy.md, "Image size"),
# 424 MB before anything was left out. The second budget holds it where it is.
IMAGE_BUDGET_MB = 500
ADDED_BUDGET_MB = 330


ContainerFailure = StackFailure


def run(*args: str, check: bool = True, capture: bool = False, timeout: float = 900, **kwargs) -> str:
    completed = subprocess.run(args, check=False, capture_output=capture, text=True, timeout=timeout, **kwargs)
    if check and completed.returncode != 0:
        detail = (completed.stderr or completed.stdout or "")[-3000:] if capture else ""
        raise ContainerFailure(f"{' '.join(args[:6])} exited with {completed.returncode}\n{detail}")
    return completed.stdout if capture else ""


# ---- the daemon --------------------------------------------------------------------------------


def docker_installed() -> None:
    missing = [name for name in ("dockerd", "debootstrap", "docker-compose", "openssl") if shutil.which(name) is None]
    if not Path(DOCKER).exists() or missing:
        log("installing Debian's docker.io, debootstrap, docker-compose and openssl (the proxy's certificate)")
        run("apt-get", "update", "-qq")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        run("apt-get", "install", "-y", "-qq", "docker.io", "debootstrap", "docker-compose", "openssl", env=env,
            capture=True)  # fmt: skip


@contextlib.contextmanager
def daemon() -> Iterator[dict[str, str]]:
    root = Path(tempfile.mkdtemp(prefix="evalsite-docker-", dir="/var/tmp"))
    # The vfs driver copies every layer whole (hundreds of thousands of files): on a disk, removing
    # them took minutes; in memory the unmount is instant. The compose stack runs 11 containers of
    # two images, a full copy of its image each: 14 GB ran out while the backup's container was
    # made, so as much as the machine has free, less 3 GB, up to 22 GB (pages are used only as
    # files are written).
    available_kb = int(re.search(r"MemAvailable:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))
    size_gb = max(14, min(22, available_kb // 1024**2 - 3))
    run("mount", "-t", "tmpfs", "-o", f"size={size_gb}g,mode=0700", "evalsite-docker", str(root))
    socket = root / "docker.sock"
    env = {**os.environ, "DOCKER_HOST": f"unix://{socket}", "DOCKER_BUILDKIT": "1"}
    log_file = open(root / "dockerd.log", "wb")  # noqa: SIM115 (closed in finally)
    process = subprocess.Popen(
        ["dockerd", "--storage-driver", "vfs", "--iptables=false", "--bridge=none", "--data-root", str(root / "data"),
         "--exec-root", str(root / "exec"), "--pidfile", str(root / "dockerd.pid"), "--host", f"unix://{socket}"],
        stdout=log_file, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        for _ in range(60):
            if subprocess.run([DOCKER, "info"], env=env, capture_output=True).returncode == 0:
                break
            time.sleep(1)
        else:
            raise ContainerFailure(
                "The Docker daemon did not answer within 60 s:\n" + (root / "dockerd.log").read_text()
            )
        log(f"private Docker daemon up ({socket})")
        yield env
    finally:
        containers = subprocess.run([DOCKER, "ps", "-aq"], env=env, capture_output=True, text=True).stdout.split()
        if containers:
            subprocess.run([DOCKER, "rm", "-f", *containers], env=env, capture_output=True)
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
        log_file.close()
        subprocess.run(["umount", "-R", str(root / "exec")], capture_output=True)
        subprocess.run(["umount", "-R", str(root)], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
        log("daemon stopped, its data removed")


# ---- the image ----------------------------------------------------------------------------------


def base_image(env: dict[str, str]) -> str:
    pulled = subprocess.run([DOCKER, "pull", OFFICIAL_BASE], env=env, capture_output=True, timeout=120)
    if pulled.returncode == 0:
        log(f"base: the official {OFFICIAL_BASE}")
        return OFFICIAL_BASE
    if not BASE_CACHE.exists():
        started = time.monotonic()
        rootfs = Path(tempfile.mkdtemp(prefix="evalsite-rootfs-", dir="/var/tmp"))
        rootfs.chmod(0o755)  # it becomes the image's "/": mkdtemp's 700 locks out every other user
        try:
            run("debootstrap", "--variant=minbase", "--include=python3,python3-venv,ca-certificates", "bookworm",
                str(rootfs), "http://deb.debian.org/debian", capture=True)  # fmt: skip
            for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
                for item in (rootfs / cache).glob("*"):
                    if item.is_file():
                        item.unlink()
            BASE_CACHE.parent.mkdir(parents=True, exist_ok=True)
            run("tar", "-C", str(rootfs), "-cf", str(BASE_CACHE), ".")
        finally:
            shutil.rmtree(rootfs, ignore_errors=True)
        log(f"base: Debian bookworm made with debootstrap in {time.monotonic() - started:.0f} s")
    with open(BASE_CACHE, "rb") as tarball:
        run(DOCKER, "import", "-", LOCAL_BASE, env=env, stdin=tarball, capture=True)
    log(f"base: {OFFICIAL_BASE} cannot be pulled here; {LOCAL_BASE} (debootstrap) imported")
    return LOCAL_BASE


def build(env: dict[str, str], base: str, *, quiet: bool = False) -> None:
    """`docker build -t evalsite:latest .`, as docs/deploy.md says, with the base and the pip CA
    this machine needs."""
    args = [DOCKER, "build", "--network", "host", "--build-arg", f"BASE_IMAGE={base}", "-t", IMAGE]
    if CA_BUNDLE.exists():  # this machine reaches PyPI through a TLS proxy whose CA is in this bundle
        args += ["--secret", f"id=pip_cert,src={CA_BUNDLE}"]
    started = time.monotonic()
    run(*args, str(ROOT), env=env, capture=True)
    seconds = time.monotonic() - started
    if quiet:
        log(f"image rebuilt in {seconds:.0f} s")
        return
    layers = json.loads(run(DOCKER, "image", "inspect", IMAGE, env=env, capture=True))[0]
    base_size = json.loads(run(DOCKER, "image", "inspect", base, env=env, capture=True))[0]["Size"]
    added = (layers["Size"] - base_size) / 1e6
    history = run(DOCKER, "history", "--format", "{{.Size}}\t{{.CreatedBy}}", IMAGE, env=env, capture=True)
    log(f"image built in {seconds:.0f} s: {layers['Size'] / 1e6:.0f} MB, of which Evalsite's layers {added:.0f} MB "
        f"on a {base_size / 1e6:.0f} MB base")  # fmt: skip
    for line in history.splitlines():
        size, command = line.split("\t", 1)
        if size != "0B":
            log(f"  layer {size:>8}  {command[:90]}")
    if seconds > BUILD_BUDGET_SECONDS:
        raise ContainerFailure(f"The build took {seconds:.0f} s, over its {BUILD_BUDGET_SECONDS} s budget.")
    if layers["Size"] / 1e6 >= IMAGE_BUDGET_MB:
        raise ContainerFailure(f"The image is {layers['Size'] / 1e6:.0f} MB, not under {IMAGE_BUDGET_MB} MB.")
    if added > ADDED_BUDGET_MB:
        raise ContainerFailure(f"Evalsite's layers are {added:.0f} MB, over their {ADDED_BUDGET_MB} MB budget.")


def services_image(env: dict[str, str], base: str) -> bool:
    """CI's image of Debian's PostgreSQL, Redis and nginx (tests/container/services/). Returns
    whether the compose file's postgres and redis services need it: True when their official
    images cannot be pulled."""
    pulled = all(
        subprocess.run([DOCKER, "pull", name], env=env, capture_output=True, timeout=120).returncode == 0
        for name in OFFICIAL_SERVICES
    )
    started = time.monotonic()
    run(DOCKER, "build", "--network", "host", "--build-arg", f"BASE_IMAGE={base}", "-t", SERVICES_IMAGE,
        str(ROOT / "tests" / "container" / "services"), env=env, capture=True)  # fmt: skip
    stand_in = "" if pulled else f"; it stands in for {' and '.join(OFFICIAL_SERVICES)}, which cannot be pulled"
    log(f"{SERVICES_IMAGE} (Debian's PostgreSQL, Redis and nginx) built in {time.monotonic() - started:.0f} s"
        f"{stand_in}")  # fmt: skip
    return not pulled


class Browser:
    """Cookies, CSRF and redirects, over HTTPS through the proxy: what a person's browser does."""

    def __init__(self, base: str, tls: ssl.SSLContext) -> None:
        self.base, self.tls = base, tls
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()), urllib.request.HTTPSHandler(context=tls)
        )

    def get(self, path: str) -> tuple[int, str, str]:
        try:
            with self.opener.open(self.base + path, timeout=30) as response:
                return response.status, response.url, response.read().decode(errors="replace")
        except urllib.error.HTTPError as error:
            return error.code, path, error.read().decode(errors="replace")

    def post_form(self, path: str, fields: dict[str, str], *, form_page: str | None = None) -> tuple[str, str]:
        _, url, page = self.get(form_page or path)
        # The page's hidden inputs as a browser sends them: the CSRF token, formset management forms.
        hidden = {}
        for tag in re.findall(r"<input[^>]*>", page):
            if 'type="hidden"' in tag and (name := re.search(r'name="([^"]+)"', tag)):
                value = re.search(r'value="([^"]*)"', tag)
                hidden.setdefault(name.group(1), value.group(1) if value else "")
        if "csrfmiddlewaretoken" not in hidden:
            raise ContainerFailure(f"{form_page or path} has no CSRF token.")
        data = urllib.parse.urlencode({**hidden, **fields}).encode()
        request = urllib.request.Request(self.base + path, data=data, headers={"Referer": url})
        with self.opener.open(request, timeout=60) as response:
            return response.url, response.read().decode(errors="replace")

    def sign_in(self) -> str:
        landed, _ = self.post_form("/accounts/login/", {"username": "admin", "password": ADMIN_PASSWORD})
        if "/accounts/login/" in landed:
            raise ContainerFailure("Signing in as the first admin user failed.")
        return urllib.parse.urlparse(landed).path


class Api:
    def __init__(self, base: str, tls: ssl.SSLContext) -> None:
        self.base, self.tls, self.token = base, tls, ""

    def __call__(self, method: str, path: str, payload: object | None = None) -> tuple[int, object]:
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(
            self.base + "/api" + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=60, context=self.tls) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode(errors="replace")

    def results(self, run_id: int) -> list[str]:
        _, results = self("GET", f"/runs/{run_id}/results?limit=100")
        return sorted(item["status"] for item in (results["items"] if isinstance(results, dict) else []))


def healthz(base: str, tls: ssl.SSLContext | None = None) -> dict:
    with urllib.request.urlopen(base + "/healthz", timeout=10, context=tls) as response:
        return json.loads(response.read())


def wait_healthy(base: str, tls: ssl.SSLContext | None = None, workers: int = 1) -> dict:
    def ready() -> dict | None:
        body = healthz(base, tls)
        return body if body.get("ok") and body["worker"].get("workers", 0) >= workers else None

    return wait_for(f"/healthz answering ok with {workers} worker(s) seen", ready, 240)


# ---- the stack, as docs/deploy.md starts it ------------------------------------------------------


def start_stack(project: Project) -> None:
    project.compose("up", "-d")
    wait_healthy(f"http://localhost:{WEB_PORT}")  # ALLOWED_HOSTS is localhost
    migrate = project.state("migrate")
    if not migrate or not migrate[0].startswith("Exited (0)"):
        raise ContainerFailure(f"The one-shot migrate service is {migrate}, not exited with 0.")
    log(f"web answers /healthz on 127.0.0.1:{WEB_PORT} with a worker seen; migrate ran once and exited 0")
    project.compose("run", "--rm", "-e", f"DJANGO_SUPERUSER_PASSWORD={ADMIN_PASSWORD}", "web", "python",
                    "manage.py", "createsuperuser", "--noinput", "--username", "admin", "--email",
                    "admin@example.com")  # fmt: skip
    checked = project.compose("run", "--rm", "web", "python", "manage.py", "check", "--deploy", "--fail-level",
                              "WARNING")  # fmt: skip
    log(f"the first admin user made; check --deploy in the container: {checked.strip().splitlines()[-1]}")


def check_proxy(tls: ssl.SSLContext) -> None:
    plain = urllib.request.build_opener(_NoRedirect)
    try:
        plain.open(f"http://localhost:{HTTP_PORT}/accounts/login/", timeout=10)
        raise ContainerFailure("The proxy answered plain HTTP without redirecting to HTTPS.")
    except urllib.error.HTTPError as error:
        if error.code != 301 or not error.headers["Location"].startswith(SITE):
            raise ContainerFailure(f"Plain HTTP answered {error.code} {error.headers['Location']}.") from None
    health = wait_healthy(SITE, tls)
    with urllib.request.urlopen(SITE + "/accounts/login/", timeout=10, context=tls) as response:
        hsts = response.headers["Strict-Transport-Security"]
    if not hsts:
        raise ContainerFailure("The sign-in page over HTTPS has no Strict-Transport-Security header.")
    log(f"through the proxy: HTTP redirects to HTTPS, /healthz ok ({health['worker']}), HSTS {hsts!r}")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # noqa: ANN002, ANN003
        return None


def check_stack(project: Project, fake: FakeLLM, tls: ssl.SSLContext) -> dict:
    browser, api = Browser(SITE, tls), Api(SITE, tls)
    # The stylesheet the sign-in page links: collected at build time under a name with its hash,
    # the only name the image keeps (WHITENOISE_KEEP_ONLY_HASHED_FILES).
    _, _, page = browser.get("/accounts/login/")
    stylesheet = re.search(r'href="(/static/css/app\.[0-9a-f]{12}\.css)"', page)
    if not stylesheet:
        raise ContainerFailure("The sign-in page links no collected (hashed) stylesheet.")
    status, _, css = browser.get(stylesheet.group(1))
    if status != 200 or "{" not in css:
        raise ContainerFailure(f"The static file {stylesheet.group(1)} answered {status}.")
    log(f"static files are served (whitenoise, collected at build time): {stylesheet.group(1)}")

    landed = browser.sign_in()
    log(f"signed in as the first admin user (createsuperuser), landed on {landed}")
    # The API page's Swagger UI comes from the collected static files (the package's own folder
    # is not in the image), under hashed names.
    status, _, page = browser.get("/api/docs")
    bundle = re.search(r'src="(/static/ninja/swagger-ui-bundle\.[0-9a-f]{12}\.js)"', page)
    if status != 200 or not bundle or browser.get(bundle.group(1))[0] != 200:
        raise ContainerFailure(f"The API page /api/docs answered {status} without its Swagger UI being served.")
    log(f"the API page is served with its Swagger UI ({bundle.group(1)})")
    browser.post_form("/accounts/teams/new/", {"new-name": "Container QA"}, form_page=landed)
    landed, page = browser.post_form(
        "/agents/new/",
        {"name": "Container agent", "kind": "llm", "instructions": "Answer refund questions.", "model": ""},
    )
    agent = re.search(r"/agents/(\d+)/", landed)
    if agent is None:
        raise ContainerFailure(f"Creating the agent did not lead to its page (landed on {landed}).")
    agent_id = int(agent.group(1))
    _, page = browser.post_form("/accounts/tokens/", {"name": "container CI"}, form_page="/accounts/settings/")
    token = re.search(r'id="new-token-value" class="mono" value="([^"]+)"', page)
    if token is None:
        raise ContainerFailure("The settings page did not show the new API token.")
    api.token = token.group(1)
    log(f"a team, an llm agent (#{agent_id}) and an API token made through the pages")

    status, dataset = api("POST", f"/agents/{agent_id}/eval/datasets", {"name": "Refunds"})
    if status != 201 or not isinstance(dataset, dict):
        raise ContainerFailure(f"Creating a dataset through the API answered {status}: {dataset}")
    datasets = f"/agents/{agent_id}/eval/datasets/{dataset['id']}"
    for number in range(1, CASES + 1):
        item = {"question": f"Question {number}: how long is the refund window?", "expected_answer": "30 days."}
        status, body = api("POST", f"{datasets}/items", item)
        if status != 201:
            raise ContainerFailure(f"Adding a case through the API answered {status}: {body}")
    log(f"dataset #{dataset['id']} imported through the API with {CASES} cases")

    fake.reset()
    fit_judge(fake)  # a judge that ranks the calibration set rightly, so it passes its preflight
    run_id = complete_run(api, fake, f"{datasets}/runs")

    for service in ("web", "worker"):
        uid = project.compose("exec", "-T", service, "id", "-u").strip()
        if uid == "0":
            raise ContainerFailure(f"{service} runs as root.")
        log(f"{service} runs as uid {uid}, not root")

    _, items = api("GET", f"{datasets}/items")
    first = (items["items"] if isinstance(items, dict) else items)[0]["id"]  # type: ignore[index]
    document = check_media(project, browser, agent_id, dataset["id"], first)
    return {"api": api, "browser": browser, "runs": f"{datasets}/runs", "run": run_id, "document": document}


def complete_run(api: Api, fake: FakeLLM, path: str) -> int:
    """Start a run as an API client does and wait for it: every case passes, one agent call each."""
    before = sum(1 for request in fake.requests if request.task == "agent")
    started = _start_run(api, path)
    run_id = started["id"]

    def finished() -> dict | None:
        _, progress = api("GET", f"/runs/{run_id}/status")
        return progress if isinstance(progress, dict) and progress.get("status") not in ("pending", "running") else None

    progress = wait_for(f"run {run_id} finishing", finished, 300)
    statuses = api.results(run_id)
    agent_calls = sum(1 for request in fake.requests if request.task == "agent") - before
    if progress["status"] != "completed" or statuses != ["pass"] * CASES or agent_calls != CASES:
        raise ContainerFailure(
            f"Run {run_id}: {progress['status']}, results {statuses}, {agent_calls} agent calls at the fake "
            f"model (expected {CASES} passes, one agent call each)."
        )
    log(f"run #{run_id} completed through the worker: {CASES} of {CASES} passed, one agent call per case "
        f"at the fake model (reached at {GATEWAY}, the compose network's gateway)")  # fmt: skip
    return run_id


def _start_run(api: Api, path: str) -> dict:
    """A judge not yet preflighted answers 409 with retry_after while a worker preflights it;
    ask again until the run starts."""
    deadline = time.monotonic() + 300
    while True:
        status, body = api("POST", path, {})
        if status == 201 and isinstance(body, dict):
            return body
        waiting = status == 409 and isinstance(body, str) and "judge_not_preflighted" in body
        if not waiting or time.monotonic() > deadline:
            raise ContainerFailure(f"Starting a run through the API answered {status}: {body}")
        time.sleep(3)


def check_media(project: Project, browser: Browser, agent_id: int, dataset_id: int, case_id: int) -> dict:
    """A document attached to a case is still served after web's container is recreated: uploads
    live on the media volume, not in the container."""
    boundary = uuid.uuid4().hex
    content = b"# Refund policy\n\nRefunds are possible within 30 days of purchase.\n"
    _, url, page = browser.get(f"/agents/{agent_id}/datasets/{dataset_id}/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    if token is None:
        raise ContainerFailure("The dataset page has no CSRF token.")
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="csrfmiddlewaretoken"\r\n\r\n{token.group(1)}\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="policy.md"\r\n'
            "Content-Type: text/markdown\r\n\r\n"
        ).encode()
        + content
        + f"\r\n--{boundary}--\r\n".encode()
    )
    request = urllib.request.Request(
        f"{browser.base}/agents/{agent_id}/datasets/{dataset_id}/cases/{case_id}/documents/",
        data=body,
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}", "Referer": url},
    )
    with browser.opener.open(request, timeout=60) as response:
        page = response.read().decode(errors="replace")
    found = re.search(rf"/agents/{agent_id}/datasets/{dataset_id}/documents/(\d+)/", page)
    if found is None:
        raise ContainerFailure(f"The attached document's link was not in the answer to the upload ({response.url}).")
    link = f"/agents/{agent_id}/datasets/{dataset_id}/documents/{found.group(1)}/download/"
    status, _, before = browser.get(link)
    project.compose("up", "-d", "--force-recreate", "--no-deps", "web")
    wait_healthy(SITE, browser.tls)
    status_after, _, after = browser.get(link)
    if (status, status_after) != (200, 200) or "within 30 days" not in after or after != before:
        raise ContainerFailure(f"The attached document answered {status} before and {status_after} after web's "
                               "container was recreated.")  # fmt: skip
    log("a document attached to a case is served the same after web's container was recreated (the media volume)")
    return {"link": link, "text": before}


def check_scale(project: Project, fake: FakeLLM, tls: ssl.SSLContext, stack: dict) -> None:
    one = healthz(SITE, tls)["worker"]["workers"]
    project.compose("up", "-d", "--scale", "worker=2")
    health = wait_healthy(SITE, tls, workers=2 * one)
    log(f"--scale worker=2: /healthz sees {health['worker']['workers']} workers (was {one})")
    complete_run(stack["api"], fake, stack["runs"])


def check_health_checks(project: Project) -> None:
    """docker-compose.yml's own health checks (docs/deploy.md, "Health checks") report every
    long-running container healthy: web's /healthz, the workers' `celery inspect ping`, beat's
    schedule file, pg_isready and redis-cli ping. Docker runs the first check an interval after
    the start (60 s for worker and beat), so this waits up to 150 s."""

    def all_healthy() -> list[str] | None:
        states = {service: project.state(service) for service in ("web", "worker", "beat", "postgres", "redis")}
        if all(states.values()) and all("(healthy)" in state for listed in states.values() for state in listed):
            return [f"{service} x{len(listed)}" for service, listed in states.items()]
        return None

    try:
        healthy = wait_for("every container healthy", all_healthy, 150)
    except StackFailure:
        states = {service: project.state(service) for service in ("web", "worker", "beat", "postgres", "redis")}
        raise StackFailure(f"The compose file's health checks did not all pass: {states}") from None
    # Web's check must ask as a client the site accepts: a Host outside ALLOWED_HOSTS (the
    # container's own 127.0.0.1) is answered 400 and logged as an error at every check.
    refused = [line for line in project.logs("web").splitlines() if "Invalid HTTP_HOST" in line]
    if refused:
        raise StackFailure(f"Web refused {len(refused)} requests for their Host, first: {refused[0][:300]}")
    log(f"the compose file's health checks report every container healthy: {', '.join(healthy)}")


# ---- operations: backup and restore, upgrade -----------------------------------------------------


def check_backup_and_restore(project: Project, tls: ssl.SSLContext, stack: dict) -> None:
    backup = project.folder / "backup"
    backup.mkdir()
    dump = project.compose_bytes("exec", "-T", "postgres", "pg_dump", "-U", "evalsite", "-Fc", "evalsite")
    (backup / "evalsite.dump").write_bytes(dump)
    project.compose("run", "--rm", "--no-deps", "-u", "root", "-v", f"{backup}:/backup", "web",
                    "tar", "-C", "/app/var/media", "-czf", "/backup/media.tar.gz", ".")  # fmt: skip
    log(f"backed up: the database ({len(dump):,} bytes, pg_dump -Fc) and the media volume "
        f"({(backup / 'media.tar.gz').stat().st_size:,} bytes, tar)")  # fmt: skip

    project.compose("down", "-v")
    log("the stack and its volumes removed (down -v)")
    project.compose("up", "-d", "postgres")
    wait_for("the new postgres answering", lambda: project.compose("exec", "-T", "postgres", "pg_isready", "-U",
             "evalsite", "-d", "evalsite"))  # fmt: skip
    project.compose("exec", "-T", "postgres", "pg_restore", "-U", "evalsite", "-d", "evalsite", "--no-owner",
                    stdin=dump)  # fmt: skip
    unpack = "tar -C /app/var/media -xzf /backup/media.tar.gz && chown -R evalsite:evalsite /app/var/media"
    project.compose("run", "--rm", "--no-deps", "-u", "root", "-v", f"{backup}:/backup", "web", "sh", "-c", unpack)
    project.compose("up", "-d")
    wait_healthy(SITE, tls)
    api, browser = stack["api"], Browser(SITE, tls)
    statuses = api.results(stack["run"])
    browser.sign_in()
    status, _, text = browser.get(stack["document"]["link"])
    if statuses != ["pass"] * CASES or status != 200 or text != stack["document"]["text"]:
        raise ContainerFailure(f"After the restore: run {stack['run']} has {statuses}, the document answered {status}.")
    log(f"restored into a new stack: run #{stack['run']}'s {CASES} results, the API token, the admin's "
        "sign-in and the attached document are all back")  # fmt: skip


def check_upgrade(project: Project, env: dict[str, str], tls: ssl.SSLContext, base: str) -> None:
    """An upgrade as the guide does it: the image rebuilt, `up -d`; the one-shot migrate service
    applies what the database lacks before web starts. The database is put one migration behind
    first (as the previous release left it)."""
    app, name = PREVIOUS_MIGRATION
    project.compose("run", "--rm", "web", "python", "manage.py", "migrate", app, name)
    build(env, base, quiet=True)
    project.compose("up", "-d")
    wait_healthy(SITE, tls)
    applied = project.logs("migrate")
    if "Applying datasets.0011" not in applied:
        raise ContainerFailure(f"up -d did not apply the migration the database lacked:\n{applied}")
    project.compose("run", "--rm", "--no-deps", "web", "python", "manage.py", "migrate", "--check")
    log("upgrade: with the database one migration behind, `up -d` ran migrate, which applied it; web is healthy")


def check_compose_file() -> None:
    """docker-compose accepts docker-compose.yml with .env.example's values (SECRET_KEY and
    POSTGRES_PASSWORD filled in, as the README says)."""
    with tempfile.TemporaryDirectory() as folder:
        env_file = Path(folder) / ".env"
        text = (ROOT / ".env.example").read_text()
        env_file.write_text(text + "\nSECRET_KEY=change-me-to-something-long\nPOSTGRES_PASSWORD=secret123\n")
        shutil.copy(ROOT / "docker-compose.yml", Path(folder) / "docker-compose.yml")
        output = run("docker-compose", "--project-directory", folder, "-f", str(Path(folder) / "docker-compose.yml"),
                     "config", capture=True)  # fmt: skip
    services = sorted(re.findall(r"^  (\w+):$", output.split("\nvolumes:")[0], re.MULTILINE))
    if services != ["beat", "migrate", "postgres", "redis", "web", "worker"]:
        raise ContainerFailure(f"docker-compose config listed the services {services}.")
    log(f"docker-compose config accepts docker-compose.yml with .env.example's values: {', '.join(services)}")


def main() -> int:
    if os.geteuid() != 0:
        print("container | needs root (a Docker daemon of its own); CI runs it as root.")
        return 2
    started = time.monotonic()
    fake = FakeLLM(host="0.0.0.0", latency=0.05).start()  # the containers reach it at the network's gateway
    try:
        docker_installed()
        check_compose_file()
        with daemon() as env:
            base = base_image(env)
            build(env, base)
            stand_ins = services_image(env, base)
            project = Project(env, fake_port=fake.port, stand_ins=stand_ins)
            try:
                run_stack(project, env, fake, base)
            except Exception:
                for service in ("migrate", "web", "worker", "postgres"):
                    print(f"---- {service} ----\n{project.logs(service)}", flush=True)
                raise
            finally:
                project.remove()
    except ContainerFailure as failure:
        print(f"container | FAILED: {failure}", flush=True)
        return 1
    finally:
        fake.stop()
    log(f"passed in {time.monotonic() - started:.0f} s")
    return 0


def run_stack(project: Project, env: dict[str, str], fake: FakeLLM, base: str) -> None:
    start_stack(project)
    certificate = start_proxy(env, project.folder)
    tls = ssl.create_default_context(cafile=str(certificate))
    check_proxy(tls)
    stack = check_stack(project, fake, tls)
    check_scale(project, fake, tls, stack)
    check_health_checks(project)
    check_backup_and_restore(project, tls, stack)
    check_upgrade(project, env, tls, base)


if __name__ == "__main__":
    sys.exit(main())
