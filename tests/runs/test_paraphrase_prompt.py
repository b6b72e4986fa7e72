"""The smoke-test paraphraser's instructions: the team's guidance decides the style of every variant."""

import pytest

from runs.engine.case import PARAPHRASE_STYLES, paraphrase_prompt


@pytest.mark.parametrize(
    "guidance",
    [
        "informal tone",
        "Sound like a customer in a hurry.",
        "Write it as an annoyed enterprise admin",
        "Keep it short, with typos",
        "Ask in Spanish",
        "Very formal, polite register",
    ],
)
@pytest.mark.parametrize("variant", range(1, len(PARAPHRASE_STYLES) + 1))
def test_guidance_about_style_replaces_every_built_in_style(guidance, variant):
    prompt = paraphrase_prompt(guidance, variant)
    assert guidance in prompt
    assert not any(style in prompt for style in PARAPHRASE_STYLES)
    assert "Follow this guidance too" not in prompt


def test_informal_guidance_never_meets_the_formal_style():
    prompts = [paraphrase_prompt("informal tone", variant) for variant in range(1, 11)]
    assert not any("formally and politely" in prompt for prompt in prompts)
    assert len(set(prompts)) == 10  # each variant still asked for on its own


@pytest.mark.parametrize("guidance", ["Mention the order number A-1042", "Keep the plan name Team"])
def test_guidance_silent_on_style_keeps_the_built_in_styles(guidance):
    prompt = paraphrase_prompt(guidance, 2)
    assert PARAPHRASE_STYLES[1] in prompt
    assert prompt.endswith(f"Follow this guidance too: {guidance}")


def test_no_guidance_uses_the_variants_own_style():
    assert PARAPHRASE_STYLES[0] in paraphrase_prompt("", 1)
    assert "guidance" not in paraphrase_prompt("", 1)
