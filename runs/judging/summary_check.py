"""A model-written run summary, checked against the run's own figures before it is shown.

The summary is prose from a model, and a model can write "10 of 10 cases passed" under a run
that passed 4. Every figure the summary states that this module can read (passed, failed and
error counts, "no failures", "all passed", pass rates, the average score, case numbers) is
compared with the run's; what disagrees is listed in plain words. The run's figures stay the
truth on the page: a summary that disagrees is written again once, then shown with its flag.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

WORD_NUMBERS = {
    "no": 0,
    "none": 0,
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
}
_NUMBER = r"(\d+|" + "|".join(WORD_NUMBERS) + r")"
_CASES = r"(?:\s+(?:of\s+the\s+)?(?:cases?|tests?|questions?|results?))?"
# "4 of 10 cases passed", "4/10 passed", "4 out of 10 tests passed"
_OF = re.compile(_NUMBER + r"\s*(?:of|/|out of)\s*" + _NUMBER + _CASES + r"\s+(?:were\s+|have\s+)?(passed|failed)")
# "4 passed", "5 cases failed", "two errors", "3 cases errored"
_COUNT = re.compile(_NUMBER + _CASES + r"\s+(?:were\s+|have\s+)?(passed|failed|errors?|errored)\b")
_NO_FAILURES = re.compile(r"\bno (?:failures|failed cases|cases failed)\b|\bnone (?:of them )?failed\b")
_ALL_PASSED = re.compile(r"\ball(?: \d+)?(?: of the)?(?: cases| tests| questions)? (?:passed|pass)\b")
_AVERAGE = re.compile(r"\baverage(?: score)?(?: of| was| is|:)?\s*(\d+(?:\.\d+)?)(?:\s*/\s*10|\s+out of 10)?")
_RATE = re.compile(r"(\d+(?:\.\d+)?)\s*%\s*(?:pass rate|of (?:the )?(?:cases|tests) passed|passed)")
_CASE_NUMBER = re.compile(r"\b(?:case|test)\s*#?\s*(\d+)\b")


@dataclass(frozen=True)
class RunFigures:
    """What the summary may state, from the run itself (cases as written, every repeat)."""

    total: int
    passed: int
    failed: int
    errored: int
    average: float | None
    case_numbers: frozenset[int]

    @property
    def scored(self) -> int:
        return self.passed + self.failed + self.errored

    @property
    def pass_rate(self) -> float | None:
        return 100 * self.passed / self.scored if self.scored else None


def _value(word: str) -> int:
    return int(word) if word.isdigit() else WORD_NUMBERS[word]


def disagreements(summary: str, figures: RunFigures) -> list[str]:
    """What the summary states that the run's figures contradict, one plain sentence each."""
    text = summary.lower().replace("’", "'")
    found: list[str] = []

    def say(claim: str, truth: str) -> None:
        sentence = f"The summary says {claim}; the run has {truth}."
        if sentence not in found:
            found.append(sentence)

    counts = {"passed": figures.passed, "failed": figures.failed}
    for part, whole, verb in _OF.findall(text):
        if _value(part) != counts[verb] or _value(whole) not in (figures.scored, figures.total):
            say(f"{part} of {whole} {verb}", f"{figures.passed} of {figures.scored} passed")
    for number, verb in _COUNT.findall(_OF.sub(" ", text)):
        key = "errored" if verb.startswith("error") else verb
        actual = {"passed": figures.passed, "failed": figures.failed, "errored": figures.errored}[key]
        if _value(number) != actual:
            say(f"{number} {verb}", f"{actual} {verb}")
    if _NO_FAILURES.search(text) and figures.failed:
        say("there were no failures", f"{figures.failed} failed")
    if _ALL_PASSED.search(text) and figures.passed != figures.scored:
        say("all passed", f"{figures.passed} of {figures.scored} passed")
    for number in _AVERAGE.findall(text):
        if figures.average is None or abs(float(number) - figures.average) >= 0.05 + 1e-9:
            truth = "no average" if figures.average is None else f"an average of {figures.average:.1f}"
            say(f"an average of {number}", truth)
    for number in _RATE.findall(text):
        rate = figures.pass_rate
        if rate is None or abs(float(number) - rate) > 0.5:
            say(f"{number}% passed", "no pass rate" if rate is None else f"{rate:.0f}% passed")
    for number in _CASE_NUMBER.findall(text):
        if int(number) not in figures.case_numbers:
            say(f"case {number}", "no such case")
    return found
