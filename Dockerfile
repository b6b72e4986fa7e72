# The Evalsite image: one image for web (gunicorn), worker and beat; see docker-compose.yml.
#
# BASE_IMAGE is the official python:3.11-slim by default. CI, which reaches no image
# registry, builds on a Debian bookworm base it makes itself (debootstrap, then
# `docker import`; `make test-container`): the same Dockerfile, only the base differs. A
# virtual environment makes both alike (Debian's own Python refuses pip installs, PEP 668).
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    MEDIA_ROOT=/app/var/media \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH

WORKDIR /app

RUN groupadd --system evalsite \
    && useradd --system --gid evalsite --home-dir /app --no-create-home --shell /usr/sbin/nologin evalsite

# Dependencies first, so code changes reuse this layer. A build behind a TLS-intercepting
# proxy passes the proxy's CA as the secret pip_cert (docker build --secret
# id=pip_cert,src=/etc/ssl/certs/ca-certificates.crt); without it pip uses the image's CAs.
# To keep the image small, byte-code is written only for the modules web and worker import
# (litellm ships thousands that a console never loads: its proxy server, most providers), and
# left out are: pip and setuptools; litellm's proxy-server UI; the translations of every
# package (about 25 MB of .po and .mo files: Evalsite runs with USE_I18N off, so none is ever
# read; the locale folders' formats.py stay); and hf-xet (11 MB), the Hugging Face hub's
# download accelerator, which huggingface_hub only uses when present and Evalsite never
# downloads from the hub.
COPY requirements.txt .
RUN --mount=type=secret,id=pip_cert,required=false \
    if [ -s /run/secrets/pip_cert ]; then export PIP_CERT=/run/secrets/pip_cert; fi \
    && python3 -m venv /opt/venv \
    && pip install --no-compile -r requirements.txt \
    && pip uninstall --yes --quiet hf-xet \
    && site="$(python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
    && rm -rf "$site/litellm/proxy/_experimental" \
    && find "$site" -path '*/locale/*/LC_MESSAGES' -prune -exec rm -rf {} + \
    && LITELLM_LOCAL_MODEL_COST_MAP=True PYTHONDONTWRITEBYTECODE= python -c 'import celery, django, gunicorn.app.wsgiapp, \
litellm, openai, openpyxl, pypdf, docx, reportlab.pdfgen.canvas, psycopg, redis, xlrd, jsonschema, whitenoise, httpx' \
    && pip uninstall --yes --quiet pip setuptools

COPY . .

# Static files are collected at build time and served by whitenoise from the image. Loading
# the project's modules (what web and worker import at start) writes their dependencies'
# byte-code too, so neither pays to compile them at every start.
RUN python manage.py collectstatic --noinput --verbosity 0 \
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
