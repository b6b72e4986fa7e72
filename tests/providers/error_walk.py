"""The errors a team meets, as the run page's cards and Test connection show them, for any provider server.

    cards = walk_error_cards(server, make_dataset, alice, client, {
        "RATE-LIMITED": ({"status": 429, "headers": {"retry-after": "0"}}, "Google Gemini rate-limited ..."),
        ...
    })

Each key is a word in one case's question; its rule (tests/fakellm.py add_rule fields) answers
that case's agent calls; the card of that case must show the expected text. A last case with no
fault passes, so one broken case never breaks the run.
"""

from __future__ import annotations

import html
import re
from typing import Any

from django.urls import reverse

from agents.models import Agent
from runs import services
from runs.models import Result, Run
from tests.providers.base import ProviderServer
from tests.runs.conftest import drive

LEAK = re.compile(r"\b\w+(Error|Exception)\b|Traceback|litellm|openai\.")


def walk_error_cards(
    server: ProviderServer, make_dataset: Any, user: Any, client: Any, faults: dict[str, tuple[dict[str, Any], str]]
) -> dict[str, str]:
    """Run one case per fault plus a healthy one; each fault's card shows its text. Returns the cards' texts."""
    for word, (rule, _) in faults.items():
        server.add_rule(task="agent", contains=word, **rule)
    questions = [f"Case {word}: how long is the refund window?" for word in faults] + ["Case OK: the refund window?"]
    dataset = make_dataset(len(questions), kind=Agent.Kind.LLM, questions=questions)

    run = drive(services.run_start(agent=dataset.agent, dataset=dataset, user=user))

    assert run.status == Run.Status.COMPLETED and run.errored == len(faults) and run.passed == 1, run.error
    page = client.get(reverse("runs:detail", args=[run.agent_id, run.pk])).content.decode()
    cards = {}
    for word, (_, expected) in faults.items():
        result = Result.objects.get(run=run, question__contains=word)
        assert result.status == Result.Status.ERROR and result.error == expected, (word, result.error)
        start = page.index(f'<li id="case-{result.case.position}"')
        card = page[start : page.index("</li>", page.index("</article>", start))]
        assert '<span class="badge badge-error">Error</span>' in card
        assert html.escape(expected) in card, (word, expected)
        cards[word] = expected
    assert not LEAK.search(page), LEAK.search(page)
    return cards
