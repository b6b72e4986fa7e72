"""The Verify panel and the Compare page pair cases and name fixes and regressions the same
way (runs.comparing.pairing), so they never disagree about the same pair of runs."""

import re

import pytest
from django.urls import reverse

from agents.models import AgentVersion
from runs.comparing.comparison import run_compare
from runs.models import Run
from suggestions.selectors import verify_comparison_get
from tests.factories import DatasetFactory
from tests.runs.review_helpers import CaseSpec, build_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def pair(agent):
    """A verify run whose copies differ from the parent's in ways the two old matchers
    handled differently: an expected answer edited since (same case id), and two cases
    that swapped places."""
    dataset = DatasetFactory(agent=agent)
    v2 = AgentVersion.objects.create(agent=agent, number=2)
    parent = build_run(
        agent=agent,
        dataset=dataset,
        cases=[
            CaseSpec(question="Refund window?", case_id="R-1", expected="30 days", repeats=[("pass", 9.0)]),
            CaseSpec(question="SLA credit?", case_id="S-1", repeats=[("fail", 2.0)]),
            CaseSpec(question="Phone number?", case_id="P-1", repeats=[("fail", 1.0)]),
            CaseSpec(question="Opening hours?", case_id="O-1", repeats=[("pass", 8.0)]),
        ],
    )
    child = build_run(
        agent=agent,
        dataset=dataset,
        version=v2,
        parent=parent,
        cases=[
            CaseSpec(question="Refund window?", case_id="R-1", expected="14 days", repeats=[("fail", 3.0)]),
            CaseSpec(question="Phone number?", case_id="P-1", repeats=[("pass", 9.0)]),
            CaseSpec(question="SLA credit?", case_id="S-1", repeats=[("pass", 8.0)]),
            CaseSpec(question="Opening hours?", case_id="O-1", repeats=[("pass", 9.0)]),
        ],
    )
    Run.objects.filter(pk=child.pk).update(purpose=Run.Purpose.VERIFY)
    child.refresh_from_db()
    return parent, child


def test_panel_and_compare_name_the_same_fixes_and_regressions(pair):
    parent, child = pair
    compared = run_compare(a=parent, b=child)
    panel = verify_comparison_get(parent=parent, run=child)

    assert sorted(c.question for c in panel.fixes) == sorted(r.question for r in compared.fixes)
    assert sorted(c.question for c in panel.regressions) == sorted(r.question for r in compared.regressions)
    assert [c.question for c in panel.regressions] == ["Refund window?"]
    assert sorted(c.question for c in panel.fixes) == ["Phone number?", "SLA credit?"]
    assert panel.compared == compared.compared == 4
    assert panel.test is not None and compared.test is not None
    assert panel.test.sentence == compared.test.sentence
    assert panel.test.interval == compared.test.interval


def _chips(html: str, label: str) -> list[str]:
    block = re.search(re.escape(label) + r"(.*?)</(?:p|div)>", html, re.S)
    assert block, label
    return sorted(re.findall(r">#(\d+)</a>", block.group(1)))


def test_the_verify_page_and_the_compare_page_show_the_same_cases(pair, agent, client_alice):
    parent, child = pair
    verify_html = client_alice.get(
        reverse("runs:detail", args=[agent.pk, child.pk]), {"tab": "suggestions"}
    ).content.decode()
    compare_html = client_alice.get(
        reverse("runs:compare", args=[agent.pk]), {"a": parent.pk, "b": child.pk}
    ).content.decode()

    assert _chips(verify_html, "Regressed:") == _chips(compare_html, 'data-changes="regressions"') == ["1"]
    assert _chips(verify_html, "Fixed:") == _chips(compare_html, 'data-changes="fixes"') == ["2", "3"]
    sentence = "v2 fixes 2 and breaks 1 case of 4; not distinguishable from noise with 4 cases (p = 1)."
    assert sentence in verify_html and sentence in compare_html
