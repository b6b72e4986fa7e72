#!/bin/sh
# postgres: initialise an empty data directory as the official image does, then serve.
# redis-server: as the official image runs it, serving other containers (no protected mode,
# which would refuse every address but loopback when no password is set).
# Anything else (nginx, a client): run it as given.
set -eu
if [ "${1:-}" = "redis-server" ]; then
    shift
    exec redis-server --protected-mode no "$@"
fi
if [ "${1:-}" != "postgres" ]; then
    exec "$@"
fi
chown postgres:postgres "$PGDATA" /run/postgresql
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    : "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is required}"
    user=${POSTGRES_USER:-postgres}
    database=${POSTGRES_DB:-$user}
    printf '%s\n' "$POSTGRES_PASSWORD" > /tmp/pwfile
    chown postgres /tmp/pwfile
    runuser -u postgres -- initdb --username="$user" --pwfile=/tmp/pwfile --auth-local=trust \
        --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 -D "$PGDATA" >/dev/null
    rm -f /tmp/pwfile
    echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
    # While it initialises, the server listens on a private socket only, so nothing (a health
    # check, a restore) reaches it before the database exists.
    runuser -u postgres -- pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -c unix_socket_directories=/tmp" \
        -w start >/dev/null
    if [ "$database" != postgres ]; then
        runuser -u postgres -- psql -q -h /tmp -U "$user" -d postgres -c "CREATE DATABASE \"$database\""
    fi
    runuser -u postgres -- pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
    echo "entrypoint: database $database and user $user created in $PGDATA"
fi
exec runuser -u postgres -- postgres -D "$PGDATA" -c listen_addresses='*'
