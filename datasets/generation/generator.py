"""Write test cases from an agent's configuration with the model.

The agent's instructions, skills, guardrails and knowledge are split into numbered
rules (R1, R2, ...). The model is asked for cases in batches, each case citing the rule
it tests. Cases are validated one by one: a case without a question or an expected
answer, with an unusable document, or too close to a case already kept is dropped
(see `is_near_duplicate`). When a batch comes back short, the next request asks for
the shortfall and names the rules that have the fewest cases so far, so the dataset
is spread across the configuration. The number of requests is bounded: when the
model still has not written enough distinct cases, generation fails with a reason.

How one case of the model's answer is read is parsing.py. Nothing here writes to the
database; services.py stores the result.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.models import Agent, AgentVersion
from datasets.generation.checks import case_problem, schema_words, shown
from datasets.generation.parsing import GeneratedCase, Rule, is_near_duplicate, parse_case, parse_scenario
from evalsite import llm

BATCH_SIZE = 10  # cases asked for in one request: keeps each answer well inside output limits
EXTRA_ROUNDS = 3  # requests allowed beyond ceil(count / BATCH_SIZE) to make up a shortfall
PROMPT_CONFIG_CHARS = 40_000  # the numbered configuration is cut here to bound the prompt
RULE_CHARS = 1_500  # one rule longer than this is cut in the prompt
SHOWN_QUESTIONS = 60  # questions already written that the model is told not to repeat
SHOWN_UNDER_COVERED = 15
# A retry after a broken answer runs warmer, so it is not the same call again.
RETRY_TEMPERATURE = 0.8


class GenerationError(Exception):
    """Generation cannot finish; the message is shown to the user as the dataset's failure reason."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass
class Generation:
    cases: list[GeneratedCase] = field(default_factory=list)
    agent_version: int | None = None  # the version whose configuration the cases were written from
    requests: int = 0
    dropped: Counter[str] = field(default_factory=Counter)  # reason -> count, for the log and the failure text
    # (kind, why) for each case the model wrote and generation did not keep: the dataset's warnings.
    rejected: list[tuple[str, str]] = field(default_factory=list)

    @property
    def warnings(self) -> list[str]:
        return [f"A case was rejected: {why}." for _kind, why in self.rejected]

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0


# ---- the agent's rules ------------------------------------------------------------------

_BULLET = re.compile(r"^\s*(?:[-*•·]|\d{1,3}[.)]|[a-zA-Z][.)])\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'“(])")


def agent_rules(version: AgentVersion) -> list[Rule]:
    """The version's configuration as numbered rules: instruction lines, skills and
    guardrails one per line (a single paragraph is split into sentences), knowledge one
    per paragraph. Headings ("Tone:") are not rules."""
    pieces: list[tuple[str, str]] = []
    for section, text in (
        ("Instructions", version.instructions),
        ("Skills", version.skills),
        ("Guardrails", version.guardrails),
    ):
        pieces += [(section, line) for line in _rule_lines(text)]
    pieces += [("Knowledge", paragraph) for paragraph in _paragraphs(version.knowledge)]
    return [Rule(number=i, section=section, text=text) for i, (section, text) in enumerate(pieces, start=1)]


def _rule_lines(text: str) -> list[str]:
    lines = [_BULLET.sub("", line).strip() for line in text.splitlines()]
    lines = [line for line in lines if line and not _is_heading(line)]
    if len(lines) == 1:
        lines = [s.strip() for s in _SENTENCE_END.split(lines[0]) if s.strip()]
    return lines


def _paragraphs(text: str) -> list[str]:
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text)]
    return [p for p in paragraphs if p and not _is_heading(p)]


def _is_heading(line: str) -> bool:
    return (line.endswith(":") and len(line.split()) <= 6) or bool(re.fullmatch(r"#+\s.*", line))


# ---- prompts ----------------------------------------------------------------------------

SYSTEM_PROMPT = """You write test cases that evaluate an AI agent. A test case is a realistic \
message a user sends to the agent, and the answer the agent should give.

For every case:
- The expected answer must follow from the agent's numbered rules and knowledge: use their \
facts, figures and policies, and never invent ones they do not state. When a rule says the \
agent must refuse, redirect or hand over, the expected answer does that and says why.
- tests_rule names the one rule the case tests most directly, as its number, e.g. "R3".
- Questions differ from each other and from any already written: vary the situation, the \
wording and the difficulty (typical requests, edge cases, ambiguous or out-of-scope requests).
- Attach a document only when the scenario needs one (the user shares an invoice, a budget \
sheet, a policy). The question then refers to it, and the expected answer uses facts that \
are in it. Give the document a title, a document_context of a few words saying what it is \
("Excel budget sheet", "Signed supplier contract") and its full content, one of:
  - table: columns and rows, for tabular data (budgets, price lists, schedules, logs);
  - paragraphs: for prose (memos, policies, contracts, emails); a paragraph starting with \
"## " is a section heading;
  - formal: a formal document (kind: invoice, receipt, quote, purchase_order, statement, \
payslip, resume, certificate or other) with parties, fields, line_items (columns and rows), \
totals (the grand total last) and notes. Figures must add up.
- Reply with JSON only: {"cases": [...]}.
"""

_TABLE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["columns", "rows"],
    "properties": {
        "columns": {"type": "array", "items": {"type": "string"}},
        "rows": {"type": "array", "items": {"type": "array", "items": {"type": ["string", "number", "null"]}}},
    },
}
_LABELLED = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["label", "value"],
        "properties": {"label": {"type": "string"}, "value": {"type": ["string", "number"]}},
    },
}
CASES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["cases"],
    "properties": {
        "cases": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["question", "expected_answer", "tests_rule"],
                "properties": {
                    "question": {"type": "string"},
                    "expected_answer": {"type": "string"},
                    "tests_rule": {"type": ["string", "integer"], "description": 'The rule tested, e.g. "R3"'},
                    "document": {
                        "type": ["object", "null"],
                        "required": ["title"],
                        "properties": {
                            "title": {"type": "string"},
                            "document_context": {"type": "string"},
                            "format_hint": {"type": "string", "description": "spreadsheet, document or pdf"},
                            "paragraphs": {"type": ["array", "null"], "items": {"type": "string"}},
                            "table": {**_TABLE_SCHEMA, "type": ["object", "null"]},
                            "formal": {
                                "type": ["object", "null"],
                                "required": ["kind"],
                                "properties": {
                                    "kind": {"type": "string"},
                                    "parties": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": ["role", "name"],
                                            "properties": {
                                                "role": {"type": "string"},
                                                "name": {"type": "string"},
                                                "details": {"type": "array", "items": {"type": "string"}},
                                            },
                                        },
                                    },
                                    "fields": _LABELLED,
                                    "line_items": {**_TABLE_SCHEMA, "type": ["object", "null"]},
                                    "totals": _LABELLED,
                                    "notes": {"type": "array", "items": {"type": "string"}},
                                },
                            },
                        },
                    },
                },
            },
        }
    },
}


# Scenario cases (kind "scenarios"): a simulated user with a goal instead of one question.
SCENARIO_PROMPT = """
These cases are SCENARIOS: a simulated user will talk to the agent over several turns. For each:
- question: the user's first message only (the starting prompt).
- scenario.goal: what the user wants to get done; scenario.plan: how they go about it, step by \
step, including what they reveal only when asked and when they would give up; scenario.persona: \
who they are and how they talk (optional); scenario.success_criteria: what the agent must do in \
the conversation to pass, from the rules; scenario.max_turns: user messages needed, 2 to 10.
- expected_answer: the outcome the agent should reach by the end, from the rules.
"""
_SCENARIO_PROPERTY: dict[str, Any] = {
    "type": "object",
    "required": ["goal", "plan", "success_criteria", "max_turns"],
    "properties": {
        "goal": {"type": "string"},
        "plan": {"type": "string"},
        "persona": {"type": "string"},
        "success_criteria": {"type": "string"},
        # Bounds are checked per case (clean_scenario drops a bad one), not for the whole answer.
        "max_turns": {"type": "integer"},
    },
}


def _scenario_schema() -> dict[str, Any]:
    item = CASES_SCHEMA["properties"]["cases"]["items"]
    scenario_item = {
        **item,
        "required": [*item["required"], "scenario"],
        "properties": {**item["properties"], "scenario": _SCENARIO_PROPERTY},
    }
    return {**CASES_SCHEMA, "properties": {"cases": {"type": "array", "items": scenario_item}}}


SCENARIO_CASES_SCHEMA = _scenario_schema()


def build_messages(
    *,
    agent: Agent,
    rules: list[Rule],
    asked: int,
    instructions: str,
    written: list[GeneratedCase],
    under_covered: list[Rule],
    scenarios: bool = False,
) -> list[dict[str, str]]:
    # The schema goes to the server as structured output; the gateway spells it out in the
    # prompt only for a server that cannot take it (structured.with_schema_hint).
    system = SYSTEM_PROMPT + (SCENARIO_PROMPT if scenarios else "")
    parts = [f"The agent: {agent.name}." + (f" {agent.description}" if agent.description else "")]
    parts.append("Its rules and knowledge, numbered:\n" + _numbered(rules))
    if not written:
        parts.append(f"Write {asked} test case{'s' if asked != 1 else ''}. {_spread_hint(asked, len(rules))}")
    else:
        parts.append(f"Write {asked} more test case{'s' if asked != 1 else ''}.")
        if under_covered:
            names = ", ".join(f"R{r.number}" for r in under_covered[:SHOWN_UNDER_COVERED])
            parts.append(f"These rules have fewer cases than the others so far; test them first: {names}.")
        shown = "\n".join(f"- {c.question[:200]}" for c in written[-SHOWN_QUESTIONS:])
        parts.append(f"Already written (do not repeat or rephrase these):\n{shown}")
    if instructions:
        parts.append(f"Additional instructions from the QA team:\n{instructions}")
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(parts)}]


def _numbered(rules: list[Rule]) -> str:
    lines: list[str] = []
    used = 0
    for rule in rules:
        text = rule.text if len(rule.text) <= RULE_CHARS else rule.text[:RULE_CHARS] + " …"
        line = f"R{rule.number} ({rule.section}): {text}"
        if used + len(line) > PROMPT_CONFIG_CHARS:
            lines.append(f"(… {len(rules) - len(lines)} more rules not shown)")
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines)


def _spread_hint(asked: int, rule_count: int) -> str:
    if asked >= rule_count:
        return f"Spread them across the rules: about {asked // rule_count} per rule, every rule at least once."
    return "Each case tests a different rule; pick the rules that matter most to users."


# ---- the loop ---------------------------------------------------------------------------


def generate_cases(
    *,
    agent: Agent,
    count: int,
    instructions: str = "",
    trace: dict[str, Any] | None = None,
    rules: list[Rule] | None = None,
    avoid: Sequence[str] = (),
    scenarios: bool = False,
) -> Generation:
    """Exactly `count` distinct cases (scenario cases with `scenarios`), or GenerationError
    (llm.LLMError passes through).

    `rules` narrows the cases to those rules (coverage's "generate for uncovered rules");
    `avoid` are questions the dataset already has, which no new case may repeat."""
    version = agent.current_version
    if rules is None:
        rules = agent_rules(version) if version is not None else []
    existing = [GeneratedCase(question=question, expected_answer="", rule=None, tests_rule="") for question in avoid]
    if not rules:
        raise GenerationError(
            "The agent has no instructions, skills, guardrails or knowledge to write test cases from. "
            "Add them on the agent's Configuration tab, then generate again."
        )
    result = Generation(agent_version=version.number if version else None)
    max_requests = math.ceil(count / BATCH_SIZE) + EXTRA_ROUNDS
    batch, temperature, retried = BATCH_SIZE, None, False
    while len(result.cases) < count and result.requests < max_requests:
        asked = min(batch, count - len(result.cases))
        messages = build_messages(
            agent=agent,
            rules=rules,
            asked=asked,
            instructions=instructions,
            written=[*existing, *result.cases],
            under_covered=_under_covered(rules, result.cases, count),
            scenarios=scenarios,
        )
        try:
            answer = llm.complete_json(
                messages,
                schema=SCENARIO_CASES_SCHEMA if scenarios else CASES_SCHEMA,
                task="generate",
                trace=trace,
                temperature=temperature,
            )
        except llm.LLMError as error:
            # An answer cut at max_tokens or still broken after its repair: asking the same
            # again would fail the same way. Once, ask for half as many cases at another temperature.
            if error.kind not in ("truncated", "invalid_json") or retried:
                raise
            result.requests += 1
            _add_usage(result, error.result)
            batch, temperature, retried = max(1, asked // 2), RETRY_TEMPERATURE, True
            continue
        result.requests += 1
        result.prompt_tokens += answer.prompt_tokens
        result.completion_tokens += answer.completion_tokens
        result.cost += answer.cost
        assert answer.data is not None  # complete_json returns only an answer that matched the object schema
        candidates = _usable_cases(answer.data.get("cases") or [], rules, result, existing, scenarios)
        result.cases += _balanced_pick(candidates, result.cases, asked)
    if len(result.cases) < count:
        raise GenerationError(_shortfall_reason(result, count))
    return result


def _add_usage(result: Generation, spent: llm.LLMResult | None) -> None:
    if spent is not None:
        result.prompt_tokens += spent.prompt_tokens
        result.completion_tokens += spent.completion_tokens
        result.cost += spent.cost


def _usable_cases(
    raw_cases: list[Any],
    rules: list[Rule],
    result: Generation,
    existing: Sequence[GeneratedCase] = (),
    scenarios: bool = False,
) -> list[GeneratedCase]:
    """Valid cases that duplicate neither a kept (or existing) case nor each other, in the model's order."""
    usable: list[GeneratedCase] = []
    own_words = [SYSTEM_PROMPT, SCENARIO_PROMPT, *schema_words(SCENARIO_CASES_SCHEMA)]
    for raw in raw_cases:
        case, problem = parse_case(raw, rules)
        if case is not None and scenarios:
            case.scenario = parse_scenario(raw)
            case, problem = (case, "") if case.scenario else (None, "no usable scenario")
        if case is None:
            result.dropped[problem] += 1
            result.rejected.append((problem, f"{problem}{_named(raw)}"))
        elif garbage := case_problem(case.question, case.expected_answer, own_words=own_words):
            result.dropped["garbage"] += 1
            result.rejected.append(("garbage", garbage))
        elif any(is_near_duplicate(case, other) for other in [*existing, *result.cases, *usable]):
            result.dropped["duplicate"] += 1
            result.rejected.append(("duplicate", f"the question {shown(case.question)} repeats an earlier one"))
        else:
            usable.append(case)
    return usable


def _named(raw: Any) -> str:
    """The first words of a dropped case, so the warning says which one it was."""
    if isinstance(raw, dict):
        for key in ("question", "expected_answer"):
            if isinstance(raw.get(key), str) and raw[key].strip():
                return f" ({key.replace('_', ' ')} {shown(raw[key])})"
    return ""


def _balanced_pick(candidates: list[GeneratedCase], kept: list[GeneratedCase], wanted: int) -> list[GeneratedCase]:
    """Up to `wanted` candidates, each time taking one whose rule has the fewest cases so far."""
    counts = Counter(_rule_key(c) for c in kept)
    pool = list(candidates)
    picked: list[GeneratedCase] = []
    while pool and len(picked) < wanted:
        best = min(pool, key=lambda c: counts[_rule_key(c)])  # min() keeps the first of equals
        pool.remove(best)
        picked.append(best)
        counts[_rule_key(best)] += 1
    return picked


def _rule_key(case: GeneratedCase) -> int:
    return case.rule.number if case.rule else 0


def _under_covered(rules: list[Rule], kept: list[GeneratedCase], count: int) -> list[Rule]:
    """Rules below their fair share (count / rules, at least one each while cases remain),
    fewest cases first."""
    if not kept:
        return []
    counts = Counter(_rule_key(c) for c in kept)
    share = max(1, count // len(rules))
    below = [rule for rule in rules if counts[rule.number] < share]
    return sorted(below, key=lambda rule: (counts[rule.number], rule.number))


def _shortfall_reason(result: Generation, count: int) -> str:
    why = []
    if result.dropped["duplicate"]:
        why.append(f"{result.dropped['duplicate']} repeated an earlier question")
    if result.dropped["garbage"]:
        example = next(why for kind, why in result.rejected if kind == "garbage")
        garbage = result.dropped["garbage"]
        verb = "was not a real test case" if garbage == 1 else "were not real test cases"
        why.append(f"{garbage} {verb}, e.g. {example}")
    unusable = sum(n for reason, n in result.dropped.items() if reason not in ("duplicate", "garbage"))
    if unusable:
        why.append(f"{unusable} had no question, no expected answer, no usable scenario or an unusable document")
    dropped = f" ({'; '.join(why)})" if why else ""
    return (
        f"The model wrote {len(result.cases)} usable test cases of the {count} asked for, "
        f"after {result.requests} requests{dropped}. Ask for fewer cases, or add instructions or "
        "knowledge to the agent so there is more to test."
    )
