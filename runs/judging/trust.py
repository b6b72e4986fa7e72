"""What a run's figures leave out or cannot vouch for, counted for the run page, the exports,
the API and `evalrun`: results the offline scorer abstained on ("Needs a judge model"), judge
answers that failed their checks ("Judge answer unusable"), model answers cut at their token
limit, and a judge that failed preflight. Each is named beside the figures, never hidden in them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q

from runs.models import Result, Run

# What each kind of call produces, in the run page's words ("6 agent answers were cut...").
CUT_NOUNS = {
    "agent": "agent answers",
    "judge": "judge answers",
    "simulator": "simulated user turns",
    "paraphrase": "paraphrased questions",
    "summary": "summaries",
}
ABSTAINED_HELP = (
    "Their expected answers describe what the agent should do (explain, decline, direct, ask...), "
    "which the offline reference scorer cannot check: they are neither passed nor failed, and left "
    "out of the pass rate."
)
ABSTAINED_HOW = "To score them, set EVALSITE_JUDGE_MODEL (see .env.example) and Re-score this run."
UNUSABLE_HELP = (
    "The judge answered, but its answer failed the checks (empty, placeholder or schema text, a copy "
    "of the prompt, or reasoning that contradicts its score): those results are errors, not verdicts."
)
PREFLIGHT_BANNER = "The judge failed preflight: its scores are not trustworthy."


def cut_label(cut: dict[str, Any]) -> str:
    """One entry of Result.cut as a card shows it: "Answer cut at 256 tokens"."""
    call = str(cut.get("call") or "agent")
    who = "Answer" if call == "agent" else f"{call.capitalize()} answer"
    limit = cut.get("limit")
    return f"{who} cut at {limit} tokens" if limit else f"{who} cut at its token limit"


def cut_setting(cut: dict[str, Any]) -> str:
    """The setting that gives this kind of call more room: EVALSITE_LLM_MAX_TOKENS_AGENT."""
    return f"EVALSITE_LLM_MAX_TOKENS_{str(cut.get('call') or 'agent').upper()}"


@dataclass
class CutCount:
    call: str
    limit: int | None
    count: int

    @property
    def setting(self) -> str:
        return f"EVALSITE_LLM_MAX_TOKENS_{self.call.upper()}"

    @property
    def sentence(self) -> str:
        return f"{self.summary}: raise {self.setting}."

    @property
    def summary(self) -> str:
        """ "6 agent answers were cut at 256 tokens"."""
        noun = CUT_NOUNS.get(self.call, f"{self.call} answers")
        if self.count == 1:
            noun = noun.replace("answers", "answer").replace("turns", "turn").replace("questions", "question")
            noun = noun.replace("summaries", "summary")
        verb = "was" if self.count == 1 else "were"
        at = f"at {self.limit} tokens" if self.limit else "at their token limit"
        return f"{self.count} {noun} {verb} cut {at}"

    def as_dict(self) -> dict[str, Any]:
        return {"call": self.call, "limit": self.limit, "count": self.count, "setting": self.setting}


@dataclass
class TrustNotes:
    abstained: int = 0
    unusable: int = 0
    cuts: list[CutCount] = field(default_factory=list)
    failed_preflight: bool = False

    @property
    def any(self) -> bool:
        return bool(self.abstained or self.unusable or self.cuts or self.failed_preflight)

    @property
    def cut_results(self) -> int:
        return sum(cut.count for cut in self.cuts)

    def lines(self) -> list[str]:
        """The notes in plain sentences, for exports and `evalrun`."""
        lines = [PREFLIGHT_BANNER] if self.failed_preflight else []
        if self.abstained:
            verb = "needs" if self.abstained == 1 else "need"
            lines.append(f"{_results(self.abstained)} {verb} a judge model. {ABSTAINED_HELP} {ABSTAINED_HOW}")
        if self.unusable:
            lines.append(f"{_results(self.unusable)}: judge answer unusable. {UNUSABLE_HELP}")
        lines += [cut.sentence for cut in self.cuts]
        return lines

    def as_dict(self) -> dict[str, Any]:
        return {
            "abstained": self.abstained,
            "judge_unusable": self.unusable,
            "cut": [cut.as_dict() for cut in self.cuts],
            "judge_failed_preflight": self.failed_preflight,
        }


def run_trust_notes(*, run: Run) -> TrustNotes:
    """The run's notes: one query, over the (few) results with an unusable judge answer or a cut
    one; the abstentions are the run's own counter."""
    flagged = Result.objects.filter(run=run).filter(Q(error_kind=Result.ErrorKind.JUDGE_UNUSABLE) | ~Q(cut=[]))
    unusable = 0
    tally: Counter[tuple[str, int | None]] = Counter()
    for error_kind, cuts in flagged.values_list("error_kind", "cut"):
        unusable += error_kind == Result.ErrorKind.JUDGE_UNUSABLE
        for cut in cuts or []:
            limit = cut.get("limit")
            tally[(str(cut.get("call") or "agent"), int(limit) if limit else None)] += 1
    return TrustNotes(
        abstained=run.abstained,
        unusable=unusable,
        cuts=[CutCount(call, limit, count) for (call, limit), count in sorted(tally.items(), key=_cut_order)],
        failed_preflight=run.judge_failed_preflight,
    )


def _cut_order(item: tuple[tuple[str, int | None], int]) -> tuple[int, str, int]:
    (call, limit), _ = item
    order = list(CUT_NOUNS)
    return (order.index(call) if call in order else len(order), call, limit or 0)


def _results(count: int) -> str:
    return f"{count} result{'s' if count != 1 else ''}"
