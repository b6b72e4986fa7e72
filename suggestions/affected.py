"""What a change to an agent would touch beyond the cases it is for, before it is applied.

- `run_expected_answers`, `version_text`: what the leak check (suggestions/leaks.py) compares.
- `knowledge_with_facts`: the offline rewrite of a knowledge field. Each new fact joins the
  passage the knowledge agent already retrieves for its case (the fact's topic), so the other
  questions that retrieved that passage still find it, rather than a new short passage that
  outranks it; a fact with no such passage becomes a paragraph of its own.
- `affected_cases`: which of the run's cases would answer differently with the new text. For a
  knowledge agent's knowledge this is the agent's own retrieval (agents.adapters.best_passages)
  before and after; an LLM agent reads every field for every case, so every case may change.
"""

import re
from dataclasses import dataclass

from agents.adapters import best_passages, split_passages
from agents.models import Agent, AgentVersion
from evalsite.text import content_terms
from runs.models import Run, RunCase
from suggestions.leaks import ExpectedAnswer, Leak, text_leaks
from suggestions.models import Suggestion

FIELDS = ("instructions", "skills", "knowledge", "guardrails")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")


def run_expected_answers(run: Run) -> list[ExpectedAnswer]:
    """The expected answers of the run's snapshot: what no text given to the agent may repeat."""
    rows = RunCase.objects.filter(run=run).exclude(expected_answer="").only("position", "number", "expected_answer")
    return [ExpectedAnswer(case_number=row.display_number, text=row.expected_answer) for row in rows]


def version_text(version: AgentVersion | None) -> str:
    """Every field an agent reads, as one text: what it already knew before a change."""
    if version is None:
        return ""
    return "\n\n".join(getattr(version, name) for name in FIELDS)


def knowledge_with_facts(current: str, additions: list[tuple[str, list[str]]]) -> str:
    """`current` with each (fact, questions of its cases) added to the paragraph the agent retrieves
    for those questions; a fact whose questions retrieve nothing becomes a paragraph of its own."""
    paragraphs = [part.strip() for part in _BLANK_LINE.split(current.strip()) if part.strip()]
    for fact, questions in additions:
        index = _anchor(paragraphs, fact, questions)
        if index is None:
            paragraphs.append(fact)
        else:
            paragraphs[index] = _extended(paragraphs[index], fact)
    return "\n\n".join(paragraphs)


_OWN_LINE = re.compile(r"^\s*(?:#{1,6}\s|[-*•]\s|\d+[.)]\s)")


def _extended(paragraph: str, fact: str) -> str:
    """The paragraph with the fact after its last sentence; on a line of its own after a heading
    or a list item, which a sentence must not run into."""
    last = paragraph.rsplit("\n", 1)[-1]
    return f"{paragraph}\n{fact}" if _OWN_LINE.match(last) else f"{paragraph} {fact}"


def _anchor(paragraphs: list[str], fact: str, questions: list[str]) -> int | None:
    # A heading alone titles the paragraph after it: the fact goes into that one, not the title.
    candidates = [index for index, text in enumerate(paragraphs) if not _HEADING_ONLY.match(text)]
    texts = [paragraphs[index] for index in candidates]
    for query in questions:
        retrieved = best_passages(query, texts)
        if retrieved:
            # Of the passages retrieved (one, or two nearly as good), the one closest to the fact.
            wanted = set(content_terms(fact))
            best = max(retrieved, key=lambda passage: len(wanted & set(content_terms(passage))))
            return candidates[texts.index(best)]
    return None


_HEADING_ONLY = re.compile(r"^(?:\s{0,3}#{1,6}\s[^\n]*\n?)+$")


@dataclass(frozen=True)
class AffectedCase:
    number: int
    question: str
    motivating: bool  # one of the cases the change is for
    what: str  # what changes for it, in plain words


def affected_cases(
    *, run: Run, agent: Agent, field: str, before: str, after: str, motivating: set[int]
) -> tuple[list[AffectedCase], str]:
    """The run's cases the new text of `field` would reach, and a sentence on how this was found."""
    cases = list(RunCase.objects.filter(run=run).order_by("position"))
    if before.strip() == after.strip():
        return [], ""
    if agent.kind == Agent.Kind.KNOWLEDGE:
        if field != "knowledge":
            return [], ""
        return _retrieval_changes(cases, before, after, motivating), (
            "Found with the knowledge agent's own retrieval: each case's question is matched against the "
            "knowledge before and after the change."
        )
    reach = [
        AffectedCase(case.display_number, case.question, case.display_number in motivating, "reads the new text")
        for case in cases
    ]
    return reach, (
        f"The agent reads its whole {field} for every question. Verify runs all {len(cases)} cases of this run "
        "after Apply."
    )


def _retrieval_changes(cases: list[RunCase], before: str, after: str, motivating: set[int]) -> list[AffectedCase]:
    old_passages, new_passages = split_passages(before), split_passages(after)
    old_set = set(old_passages)
    affected = []
    for case in cases:
        old, new = best_passages(case.question, old_passages), best_passages(case.question, new_passages)
        if old == new:
            continue
        added = [passage for passage in new if passage not in old_set]
        if added:
            what = "would now retrieve the new text: “" + _opening(_new_part(added[0], old_passages)) + "”"
        elif new:
            what = "would retrieve other passages than before: “" + _opening(new[0]) + "”"
        else:
            what = "would no longer find any passage"
        number = case.display_number
        affected.append(AffectedCase(number, case.question, number in motivating, what))
    return affected


def _new_part(passage: str, old_passages: list[str]) -> str:
    """What a passage gained: the text after the old passage it extends (the whole passage when new)."""
    for old in old_passages:
        if passage.startswith(old):
            return passage[len(old) :].strip() or passage
    return passage


def _opening(passage: str, limit: int = 90) -> str:
    text = " ".join(passage.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


@dataclass(frozen=True)
class ChangeCheck:
    """What Apply's review step says about one field's new text."""

    leaks: list[Leak]
    affected: list[AffectedCase]
    how: str  # how the affected cases were found
    every_case: bool = False  # the agent reads the field for every question (an LLM agent)

    @property
    def others(self) -> list[AffectedCase]:
        """Affected cases the change was not made for: where a fix can become a regression."""
        return [case for case in self.affected if not case.motivating]

    @property
    def motivating(self) -> list[AffectedCase]:
        return [case for case in self.affected if case.motivating]


def change_check(
    *, run: Run, agent: Agent, base: AgentVersion, field: str, text: str, group: list[Suggestion]
) -> ChangeCheck:
    motivating = {case.display_number for suggestion in group for case in suggestion.cases.all()}
    affected, how = affected_cases(
        run=run, agent=agent, field=field, before=getattr(base, field), after=text, motivating=motivating
    )
    leaks = text_leaks(text, answers=run_expected_answers(run), known=version_text(base))
    every_case = agent.kind != Agent.Kind.KNOWLEDGE and bool(affected)
    return ChangeCheck(leaks=leaks, affected=affected, how=how, every_case=every_case)
