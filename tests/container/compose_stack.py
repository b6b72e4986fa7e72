"""The compose project that `make test-container` starts: docker-compose.yml as a team runs it.

A folder of its own holds a copy of docker-compose.yml and the `.env` made from .env.example
(docs/deploy.md's "Set up"); every command below runs there, as the guide writes it, with
Debian's docker-compose 1.29 (the compose v2 plugin is not packaged for these machines; both
read the same file). Two things differ from a team's server, both in a
`docker-compose.override.yml` that compose reads beside the file:

- the network's subnet is fixed, so the containers reach the project's fake model server at
  its gateway address (a team's model is elsewhere);
- when the official `postgres` and `redis` images cannot be pulled (no registry is reachable
  from CI), those two services run CI's stand-in made from Debian's packages
  (tests/container/services/), which behaves as they do where the compose file relies on it.

The TLS proxy is deploy/nginx.conf, run by Debian's nginx (in that stand-in image, on the host's
network) with a self-signed certificate: its name, certificate paths and ports changed, nothing
else.
"""

from __future__ import annotations

import re
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKER = "/usr/bin/docker"  # Debian's client, the daemon's own version
SUBNET = "172.31.213.0/24"
GATEWAY = "172.31.213.1"
WEB_PORT = 8191  # the web service's published port on 127.0.0.1 (PORT in .env); not 8190 (make local-model)
HTTPS_PORT = 8443
HTTP_PORT = 8480
SITE = f"https://localhost:{HTTPS_PORT}"
SERVICES_IMAGE = "evalsite-ci/services:bookworm"
ADMIN_PASSWORD = "container-admin-password"


class StackFailure(Exception):
    pass


def log(message: str) -> None:
    print(f"container | {message}", flush=True)


class Project:
    """A folder with docker-compose.yml and its .env, and the commands a team runs in it."""

    def __init__(self, env: dict[str, str], *, fake_port: int, stand_ins: bool) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="evalsite-compose-"))
        shutil.copy(ROOT / "docker-compose.yml", self.folder / "docker-compose.yml")
        settings = {
            "SECRET_KEY": secrets.token_urlsafe(50),
            "POSTGRES_PASSWORD": "ciPostgres123",
            "PORT": str(WEB_PORT),
            "ALLOWED_HOSTS": "localhost",
            "CSRF_TRUSTED_ORIGINS": SITE,
            "SITE_URL": SITE,
            "SECURE_SSL": "true",
            "SECURE_PROXY_SSL_HEADER": "true",
            "LOGIN_TRUSTED_PROXIES": "1",
            "EVALSITE_LLM_MODEL": "openai/fake-agent",
            "EVALSITE_JUDGE_MODEL": "openai/fake-judge",
            "EVALSITE_LLM_API_BASE": f"http://{GATEWAY}:{fake_port}/v1",
            "EVALSITE_LLM_API_KEY": "container-test",
        }
        text = _env_file((ROOT / ".env.example").read_text(), settings)
        (self.folder / ".env").write_text(text)
        # Compose lets the shell's variables override .env; `make` exports PORT and HOST (for
        # `make run`), which published web on 8000 instead of .env's port. As from a fresh shell:
        # nothing that .env sets comes from the environment.
        named = {line.split("=", 1)[0] for line in text.splitlines() if "=" in line and not line.startswith("#")}
        self.env = {name: value for name, value in env.items() if name not in named}
        override = ["networks:", "  default:", "    ipam:", "      config:", f"        - subnet: {SUBNET}"]
        if stand_ins:
            override = ["services:", *(f"  {name}:\n    image: {SERVICES_IMAGE}" for name in ("postgres", "redis")),
                        *override]  # fmt: skip
        (self.folder / "docker-compose.override.yml").write_text("\n".join(override) + "\n")

    def compose(self, *args: str, stdin: bytes | None = None, timeout: float = 600, quiet: bool = False) -> str:
        return self.compose_bytes(*args, stdin=stdin, timeout=timeout, quiet=quiet).decode(errors="replace")

    def compose_bytes(self, *args: str, stdin: bytes | None = None, timeout: float = 600, quiet: bool = False) -> bytes:
        """`docker-compose ARGS` in the project's folder; what it printed, or StackFailure."""
        if not quiet:
            log("$ docker-compose " + " ".join(args))
        done = subprocess.run(
            ["docker-compose", *args], cwd=self.folder, env=self.env, input=stdin, capture_output=True, timeout=timeout
        )
        if done.returncode != 0:
            raise StackFailure(
                f"docker-compose {' '.join(args)} exited {done.returncode}:\n"
                + done.stdout.decode(errors="replace")[-3000:]
                + done.stderr.decode(errors="replace")[-3000:]
            )
        return done.stdout

    def state(self, service: str) -> list[str]:
        """The `docker ps` states of a service's containers (`Up 3 seconds`, `Exited (0) ...`)."""
        ids = self.compose("ps", "-q", service, quiet=True).split()
        return [
            subprocess.run([DOCKER, "ps", "-a", "--filter", f"id={cid}", "--format", "{{.Status}}"], env=self.env,
                           capture_output=True, text=True).stdout.strip()
            for cid in ids
        ]  # fmt: skip

    def logs(self, service: str) -> str:
        return subprocess.run(
            ["docker-compose", "logs", "--no-color", "--tail", "80", service],
            cwd=self.folder, env=self.env, capture_output=True, text=True,
        ).stdout  # fmt: skip

    def remove(self) -> None:
        subprocess.run(["docker-compose", "down", "-v"], cwd=self.folder, env=self.env, capture_output=True)
        shutil.rmtree(self.folder, ignore_errors=True)


def _env_file(example: str, settings: dict[str, str]) -> str:
    """.env.example with the given settings filled in, as a team edits it."""
    lines, seen = [], set()
    for line in example.splitlines():
        name = line.split("=", 1)[0]
        if "=" in line and not line.startswith("#") and name in settings:
            lines.append(f"{name}={settings[name]}")
            seen.add(name)
        else:
            lines.append(line)
    lines += [f"{name}={value}" for name, value in settings.items() if name not in seen]
    return "\n".join(lines) + "\n"


# ---- the TLS proxy ------------------------------------------------------------------------------


def start_proxy(env: dict[str, str], folder: Path) -> Path:
    """deploy/nginx.conf in Debian's nginx on the host's network, with a self-signed certificate
    for localhost. Returns the certificate, for the client to trust."""
    tls = folder / "tls"
    tls.mkdir()
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost", "-keyout", str(tls / "privkey.pem"), "-out",
         str(tls / "fullchain.pem")],
        check=True, capture_output=True,
    )  # fmt: skip
    site = (ROOT / "deploy" / "nginx.conf").read_text()
    site = site.replace("evalsite.example.com;", "localhost;")
    site = re.sub(r"/etc/letsencrypt/live/evalsite\.example\.com/", "/tls/", site)
    site = site.replace("listen 80;", f"listen 127.0.0.1:{HTTP_PORT};")
    site = site.replace("listen 443 ssl;", f"listen 127.0.0.1:{HTTPS_PORT} ssl;")
    site = site.replace("https://$host$request_uri", f"https://$host:{HTTPS_PORT}$request_uri")
    site = site.replace("proxy_pass http://127.0.0.1:8000;", f"proxy_pass http://127.0.0.1:{WEB_PORT};")
    (tls / "evalsite.conf").write_text(site)
    (tls / "nginx.conf").write_text(
        "pid /tmp/nginx.pid;\nerror_log stderr;\nevents {}\n"
        "http {\n  access_log off;\n  include /etc/nginx/mime.types;\n  include /tls/evalsite.conf;\n}\n"
    )
    subprocess.run(
        [DOCKER, "run", "-d", "--name", "evalsite-proxy", "--network", "host", "-v", f"{tls}:/tls:ro",
         SERVICES_IMAGE, "nginx", "-c", "/tls/nginx.conf", "-g", "daemon off;"],
        env=env, check=True, capture_output=True,
    )  # fmt: skip

    def listening() -> bool:
        with socket.create_connection(("127.0.0.1", HTTPS_PORT), timeout=2):
            return True

    try:
        wait_for(f"nginx listening on {HTTPS_PORT}", listening, 60)
    except StackFailure:
        logs = subprocess.run([DOCKER, "logs", "evalsite-proxy"], env=env, capture_output=True, text=True)
        raise StackFailure(f"nginx did not start:\n{logs.stdout}{logs.stderr}") from None
    log(f"TLS proxy: deploy/nginx.conf in nginx on {SITE} (self-signed certificate for localhost)")
    return tls / "fullchain.pem"


def wait_for(what: str, check, seconds: float = 180):  # noqa: ANN001 (a predicate returning a value or None)
    deadline = time.monotonic() + seconds
    last: object = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except Exception as error:  # a service still starting answers with errors of every kind
            last = error
        time.sleep(2)
    raise StackFailure(f"{what} did not happen within {seconds:.0f} s (last: {last!r})")
