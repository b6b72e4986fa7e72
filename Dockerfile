# The Evalsite image: one image for web (gunicorn), worker and beat; see docker-compose.yml.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    MEDIA_ROOT=/app/var/media

WORKDIR /app

RUN groupadd --system evalsite \
    && useradd --system --gid evalsite --home-dir /app --no-create-home --shell /usr/sbin/nologin evalsite

# Dependencies first, so code changes reuse this layer.
COPY requirements.txt .
RUN pip install -r requirements.txt

COPY . .

# Static files are collected at build time and served by whitenoise from the image.
RUN python manage.py collectstatic --noinput --verbosity 0 \
    && mkdir -p /app/var/media \
    && chown -R evalsite:evalsite /app/var

USER evalsite

EXPOSE 8000

# WEB_CONCURRENCY sets gunicorn's worker count. The control socket is off: the
# container has no writable home directory and needs no runtime control.
CMD ["gunicorn", "evalsite.wsgi:application", "--bind", "0.0.0.0:8000", "--timeout", "60", \
     "--graceful-timeout", "20", "--access-logfile", "-", "--error-logfile", "-", "--no-control-socket"]
