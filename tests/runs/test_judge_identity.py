"""Model identity (issue 33, item 4): what the server says it runs behind a model name is read
from every call, Test connection and preflight, and a model swapped behind one alias makes a
new judge configuration, so its scores are never taken for the old judge's."""

import pytest
from django.core.cache import cache

from agents.models import Agent
from evalsite import llm
from evalsite.llm import identity
from runs.judging import configs as judging
from runs.judging.scoring import Evaluation, judge

pytestmark = pytest.mark.django_db
ASK = [{"role": "user", "content": "Hello"}]


def _judge_once() -> None:
    judge(Evaluation(question="Q?", answer="A.", expected_answer="A."), {}, {})


def test_a_call_reports_the_model_and_fingerprint_the_server_named(fake_llm):
    fake_llm.set_model_identity("fake-agent", reported="qwen2.5-7b-instruct-q4_k_m.gguf", system_fingerprint="b4567")

    result = llm.complete(ASK, task="agent")

    assert result.model_reported == "qwen2.5-7b-instruct-q4_k_m.gguf"
    assert result.system_fingerprint == "b4567"
    assert result.model == "openai/fake-agent"


def test_the_first_call_records_the_identity_with_the_servers_model_metadata(fake_llm):
    fake_llm.set_model_identity(
        "fake-judge", reported="gemma-3-270m.gguf", system_fingerprint="b4567", meta={"n_params": 268098176}
    )

    _judge_once()

    seen = identity.identity_get("openai/fake-judge")
    assert seen is not None
    assert seen.text == "gemma-3-270m.gguf · build b4567 · n_params 268098176"


def test_a_server_that_only_echoes_the_name_adds_nothing(fake_llm, make_dataset):
    dataset = make_dataset(1, kind=Agent.Kind.LLM)
    before = judging.dataset_judge_config(dataset=dataset)

    _judge_once()

    seen = identity.identity_get("openai/fake-judge")
    assert seen is not None and seen.text == ""
    assert judging.dataset_judge_config(dataset=dataset) == before  # the same fingerprint as before


def test_a_model_swapped_behind_one_alias_is_a_new_judge_configuration(fake_llm, make_dataset):
    dataset = make_dataset(1, kind=Agent.Kind.LLM)
    fake_llm.set_model_identity("fake-judge", reported="SmolLM2-135M-Instruct-Q8_0.gguf")
    _judge_once()
    first = judging.dataset_judge_config(dataset=dataset)

    fake_llm.set_model_identity("fake-judge", reported="gemma-3-270m-it-Q4_K_M.gguf")  # same alias, new weights
    _judge_once()
    second = judging.dataset_judge_config(dataset=dataset)

    assert first.model_identity == "SmolLM2-135M-Instruct-Q8_0.gguf"
    assert second.model_identity == "gemma-3-270m-it-Q4_K_M.gguf"
    assert second.number == first.number + 1 and second.fingerprint != first.fingerprint
    assert first.judge_model == second.judge_model == "openai/fake-judge"


def test_a_swap_seen_only_in_the_model_metadata_is_noticed_at_preflight_or_test_connection(fake_llm, make_dataset):
    dataset = make_dataset(1, kind=Agent.Kind.LLM)
    fake_llm.set_model_identity("fake-judge", meta={"n_params": 134515008, "size": 144000000})
    _judge_once()
    first = judging.dataset_judge_config(dataset=dataset)

    fake_llm.set_model_identity("fake-judge", meta={"n_params": 268098176, "size": 241000000})
    identity.identity_refresh("openai/fake-judge")

    second = judging.dataset_judge_config(dataset=dataset)
    assert second.number == first.number + 1
    assert "n_params 268098176" in second.model_identity


def test_an_emptied_cache_keeps_the_last_known_identity(fake_llm, make_dataset):
    dataset = make_dataset(1, kind=Agent.Kind.LLM)
    fake_llm.set_model_identity("fake-judge", reported="SmolLM2-135M-Instruct-Q8_0.gguf")
    _judge_once()
    known = judging.dataset_judge_config(dataset=dataset)

    cache.clear()  # a Redis restart

    assert judging.dataset_judge_config(dataset=dataset) == known


def test_two_runs_across_a_swap_are_said_to_have_different_judges(fake_llm, make_dataset):
    from runs import services

    dataset = make_dataset(1, kind=Agent.Kind.LLM)
    fake_llm.set_model_identity("fake-judge", reported="model-a.gguf")
    _judge_once()
    before = services.run_start(agent=dataset.agent, dataset=dataset, user=None)
    fake_llm.set_model_identity("fake-judge", reported="model-b.gguf")
    _judge_once()
    after = services.run_start(agent=dataset.agent, dataset=dataset, user=None)

    assert before.judge_config != after.judge_config
    assert "different judges" in (judging.judges_differ(before, after) or "")


def test_a_swap_behind_a_llama_cpp_python_alias_is_told_by_its_tokenizer(fake_llm, make_dataset):
    # llama-cpp-python answers with the alias it was asked for and lists only that alias:
    # the tokenizer of the model behind it is what changes.
    dataset = make_dataset(1, kind=Agent.Kind.LLM)
    fake_llm.set_model_identity("fake-judge", vocabulary=49152)  # SmolLM2's vocabulary size
    identity.identity_refresh("openai/fake-judge")
    first = judging.dataset_judge_config(dataset=dataset)

    fake_llm.set_model_identity("fake-judge", vocabulary=262144)  # Gemma 3's
    identity.identity_refresh("openai/fake-judge")
    second = judging.dataset_judge_config(dataset=dataset)

    assert first.model_identity.startswith("tokenizer ") and "tokens #" in first.model_identity
    assert second.model_identity != first.model_identity
    assert second.number == first.number + 1


def test_one_process_at_a_time_reads_a_models_metadata_and_the_others_find_it_in_the_cache(fake_llm):
    # A run's lanes are processes that all make their first call to a model at once: only one
    # of them reads /v1/models and the tokenizer (three requests), the others go on with their
    # calls and take what it stored. (Three lanes each reading cost a 0 ms run 18 requests.)
    fake_llm.set_model_identity("fake-judge", reported="gemma-3-270m.gguf", meta={"n_params": 268098176})
    reading = identity.CACHE_KEY + identity._key("openai/fake-judge") + ":reading"
    cache.set(reading, 1, 30)  # another process is reading the metadata now

    _judge_once()

    assert fake_llm.models_reads == 0
    assert identity.identity_get("openai/fake-judge") is None

    cache.delete(reading)  # ... and has stored what it read
    identity.forget()
    identity.identity_observe("openai/fake-judge", _Reported("gemma-3-270m.gguf"))
    reads = fake_llm.models_reads
    identity.forget()  # another process, whose first call reports the same

    _judge_once()

    assert fake_llm.models_reads == reads == 1
    seen = identity.identity_get("openai/fake-judge")
    assert seen is not None and seen.text == "gemma-3-270m.gguf · n_params 268098176"


class _Reported:
    def __init__(self, model: str) -> None:
        self.model_reported, self.system_fingerprint = model, ""
