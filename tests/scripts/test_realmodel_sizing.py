"""The compatibility suite sizes its model timeouts from a measured warm-up (tests/realmodel):
these run in the main suite, without llama.cpp."""

from pathlib import Path

from tests.realmodel.conftest import sized_timeouts
from tests.realmodel.server import MAX_TIMEOUT, MIN_TIMEOUT, LlamaServer


def server_at(writing: float, reading: float = 600.0) -> LlamaServer:
    server = LlamaServer(Path("unused.log"))
    server.tokens_per_second, server.prompt_per_second = writing, reading
    return server


def test_a_fast_server_keeps_the_floor():
    assert server_at(200).timeout_for(400) == MIN_TIMEOUT


def test_a_slow_server_gets_time_for_its_longest_answer():
    # A 600-token prompt in 1 s and 1,024 tokens at 16 tokens/s (64 s), three times over.
    assert server_at(16).timeout_for(1024) == 195


def test_a_loaded_server_gets_time_to_read_its_prompt():
    # Issue 33's machine read a 479-token prompt in 150 s: 600 tokens at 3.2 tokens/s is 188 s.
    assert server_at(16, reading=3.2).timeout_for(48) == 572


def test_a_crawling_server_is_capped_so_a_hang_still_fails():
    assert server_at(0.5).timeout_for(2000) == MAX_TIMEOUT


def test_every_call_kind_gets_a_timeout_of_its_own():
    timeouts = sized_timeouts(server_at(16), {"judge": 400, "coverage": 2000, "probe": 8})

    assert timeouts == {"judge": 78.0, "coverage": 378.0, "probe": 60.0}
