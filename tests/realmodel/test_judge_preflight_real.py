"""SmolLM2-135M as judge fails its preflight (issue 33): a model that cannot tell a right answer
from a wrong one is caught on the calibration set before it scores a run, and a run started
anyway is marked. Also what llama-cpp-python says it runs behind its alias."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from agents.models import Agent
from evalsite import llm
from evalsite.llm import identity
from runs import services
from runs.judging import configs as judging
from runs.judging.preflight import calibration_items
from runs.services.preflight import judge_config_preflight
from tests.realmodel.server import MODEL_ALIAS

# Transactional: a test holding its transaction open while a slow model answers is ended by the
# shipped idle_in_transaction_session_timeout (20 s), as the product never does (it calls models
# outside transactions); on a loaded CI machine the preflight's 15 calls took longer than that.
pytestmark = [pytest.mark.realmodel, pytest.mark.django_db(transaction=True)]
# Room for a judge's JSON with 2-4 sentences of reasoning, and no more: a 135M model rambles
# to its limit, and 15 rambling answers on a loaded 2-core machine outlast any timeout.
JUDGE_TOKENS = 160
JUDGE_SECONDS = 300.0


def test_the_server_reports_what_it_runs_behind_its_alias(real_llm):
    result = llm.complete([{"role": "user", "content": "Say hi."}], task="probe", max_tokens=8, timeout=120)
    seen = identity.identity_refresh(f"openai/{MODEL_ALIAS}")

    # llama-cpp-python answers with the alias it was asked for and lists only that alias...
    assert result.model_reported == MODEL_ALIAS
    # ...so the model behind it is told by its tokenizer.
    assert seen is not None and seen.text.startswith("tokenizer ") and " tokens #" in seen.text


@pytest.mark.timeout(3000)
def test_smollm2_as_judge_fails_its_preflight_and_a_run_started_anyway_is_marked(real_llm, make_dataset, settings):
    settings.EVALSITE_LLM_MAX_TOKENS = {**settings.EVALSITE_LLM_MAX_TOKENS, "judge": JUDGE_TOKENS}
    # A call that times out leaves llama.cpp generating it (and holds the slot), so the next
    # one waits too: on a loaded machine, give each call the time it needs instead.
    settings.EVALSITE_LLM_TIMEOUTS = {"judge": JUDGE_SECONDS}
    dataset = make_dataset(1, kind=Agent.Kind.LLM)

    config = judge_config_preflight(config=judging.dataset_judge_config(dataset=dataset))

    details = config.preflight
    print("SmolLM2 preflight:", details["reasons"], [(i["kind"], i["score"], i["problem"]) for i in details["items"]])
    assert config.preflight_status == "failed", details
    assert details["reasons"], details
    assert len(details["items"]) == len(calibration_items())
    assert details["in_place"] < details["total"]
    assert details["tokens"] > 0 and details["model"] == f"openai/{MODEL_ALIAS}"
    assert config.model_identity.startswith("tokenizer ")
    for item in details["items"]:  # every item is either scored or says why not
        assert item["score"] is not None or item["problem"], item

    with pytest.raises(ValidationError) as refused:
        services.run_start(agent=dataset.agent, dataset=dataset, user=None)
    assert refused.value.code == services.JUDGE_FAILED_PREFLIGHT
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=None, allow_failed_preflight=True)
    assert run.judge_failed_preflight and run.judge_config == config
