"""What the offline reference scorer can check in an expected answer, and what it cannot.

With no judge model, a case is scored by comparing facts: the figures, names and key phrases
the expected answer states (evalsite.text.point_covered). Many test plans describe behaviour
instead ("Agent politely declines", "directs them to Billing > Refund", "The bot asks for the
order number"): whether an answer does that is a judgement no word match can make, so the
scorer abstains on it ("Needs a judge model") rather than guess a pass or a fail.

The rule, clause by clause (sentences, semicolons, list items and ", so ..." conclusions):
- A clause that states content is a fact: "Refunds take 5 days", "You can ... within 14 days".
- A clause where the agent (agent, bot, assistant, response...) reports content is the fact it
  reports: "Agent explains that monthly plans are refundable within 14 days" checks "monthly
  plans are refundable within 14 days". A report with no content of its own ("explains the
  refund policy", "tells them how to reset it") is behaviour.
- Any other clause about the agent or its answer is behaviour: an action ("directs them to
  Billing > Refund", "declines", "apologises", "asks for"), a manner ("politely", "should be
  brief"), a refusal ("I don't know", "the knowledge does not say"), a conclusion about this
  customer's case ("so the customer is eligible", "the user is not eligible").
- Only an expected answer made of facts alone gets a pass or a fail. One with any behaviour
  abstains: the facts it states are still checked and reported in the reasoning, but never
  decide, because a correct answer can do what was asked in words no match would find.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from evalsite.text import fact_terms, is_refusal, point_covered
from runs.judging import behaviour as conduct

# Who an expected answer names when it describes the agent's behaviour.
# "The response / answer / reply" only before a modal ("The response should be brief"): "Response
# times are 4 hours" and "The answer is 30 days" state facts.
_ACTOR = (
    r"(?:(?:the\s+|an?\s+|our\s+)?(?:support agent|support bot|virtual agent|virtual assistant|ai assistant|"
    r"ai agent|agent|bot|chatbot|assistant)"
    r"|(?:the\s+|its\s+)?(?:response|answer|reply)"
    r"(?=\s+(?:should|must|will|shall|needs to|has to|is expected to|ought to)\b))"
)
# Words between the actor and its verb: "Agent should politely decline", "The bot must first ask".
_MODAL = r"(?:should|must|will|shall|would|needs to|has to|ought to|is expected to|is supposed to|is able to|does|can)"
_MANNER = (
    r"(?:not|never|always|also|first|then|still|politely|clearly|briefly|kindly|gently|calmly|correctly|"
    r"immediately|promptly|empathetically|courteously|professionally|accurately|simply|only|just)"
)
_ACTOR_CLAUSE = re.compile(rf"^{_ACTOR}\b(?:\s+{_MODAL})?(?:\s+{_MANNER})*\s*(?P<rest>.*)$", re.IGNORECASE | re.DOTALL)
# A clause opened by a duty or a manner with no subject: "Should not promise a refund", "Politely declines".
# Not "Only...", "Then...", "Can...": "Only annual plans are refundable" is a fact.
_BARE_BEHAVIOUR = re.compile(
    r"^(?:should|must|needs to|has to|is expected to|politely|kindly|gently|calmly|empathetically|courteously|"
    r"professionally|never|always)\b",
    re.IGNORECASE,
)
# The verbs that report content: what follows them is the fact the answer must state.
_REPORTING = frozenset(
    """explain explains say says state states tell tells confirm confirms inform informs mention mentions
    answer answers reply replies respond responds note notes clarify clarifies remind reminds""".split()
)
# Verbs an expected answer uses for what the agent does, 3rd person: a clause that starts with
# one has the agent as its subject ("...; directs them to Billing > Refund", "Apologises and...").
_ACTIONS = frozenset(
    """declines refuses directs redirects apologises apologizes asks offers escalates suggests recommends
    provides acknowledges thanks greets guides walks transfers hands routes points links shares requests
    prompts invites encourages reassures empathises empathizes avoids lists summarises summarizes checks
    verifies looks calls uses opens creates follows keeps remains maintains handles treats warns
    instructs advises helps tries attempts gives sends collects gathers identifies recognises recognizes
    flags logs expresses shows displays refers points asks""".split()
)
# A second act after the reported words: "says it cannot help and suggests contacting support".
_SECOND_ACTS = frozenset(
    """apologises apologizes escalates suggests recommends offers declines refuses redirects directs
    asks transfers""".split()
)
# Who the reported fact is told to, and "that": "tells the customer that X" reports X.
_AUDIENCE = re.compile(
    r"^(?:to\s+(?:the\s+)?(?:customer|user|caller|client|requester|them|him|her)\s+)?(?:that\s+)?", re.IGNORECASE
)
# "tells/informs/reminds the customer that X" takes its audience without "to".
_TELLING = frozenset("tell tells inform informs remind reminds".split())
_OBJECT = re.compile(r"^(?:(?:the\s+)?(?:customer|user|caller|client|requester)|them|him|her)\s+", re.IGNORECASE)
# A report of something unnamed: "explains how to reset", "tells them which plan fits".
_ABSTRACT = re.compile(r"^(?:how|why|what|where|when|which|whether|if)\b", re.IGNORECASE)
# A finite verb: the reported words state something ("...are refundable", "...costs $79").
_STATEMENT = re.compile(
    r"\b(?:is|are|was|were|can|cannot|can't|will|won't|has|have|had|must|may|does|do|doesn't|don't|"
    r"needs?|takes?|costs?|includes?|requires?|stays?|gets?|lasts?|offers?|accepts?|expires?|applies|apply)\b",
    re.IGNORECASE,
)
# This customer's case, not a fact of the knowledge: "the customer is eligible".
_CASE_SUBJECT = re.compile(r"^(?:so\s+|therefore\s+|thus\s+)?the\s+(?:customer|user|caller|client|requester)\b", re.I)
# A conclusion drawn for this case: ", so the customer is eligible", ", which means...".
_CONCLUSION = re.compile(r",?\s+(?=(?:so|therefore|thus|hence|which means|meaning)\b)", re.IGNORECASE)
_CLAUSES = re.compile(r"(?<=[.!?])\s+|\n+|;\s*|:\s+(?=[A-Z])")


@dataclass
class OfflineCheck:
    """The facts the scorer checked (covered or not) and the behaviour it left to a judge."""

    facts: list[str] = field(default_factory=list)
    covered: list[str] = field(default_factory=list)
    behaviour: list[str] = field(default_factory=list)

    @property
    def missed(self) -> list[str]:
        return [fact for fact in self.facts if fact not in self.covered]

    @property
    def abstains(self) -> bool:
        return bool(self.behaviour) or not self.facts


def offline_check(expected: str, answer: str) -> OfflineCheck:
    """Split `expected` into the facts it states and the behaviour it describes; check the facts."""
    check = OfflineCheck()
    if is_refusal(expected):  # "I don't know", "the knowledge does not say": how to decline
        check.behaviour.append(expected.strip())
        return check
    for clause in _clauses(expected):
        facts, behaviour = _classify(clause)
        check.facts += facts
        check.behaviour += behaviour
    check.covered = [fact for fact in check.facts if point_covered(fact, answer)]
    return check


def _clauses(expected: str) -> list[str]:
    parts = (part.strip(" -*•\t") for part in _CLAUSES.split(expected.strip()))
    return [part for part in parts if fact_terms(part) or _ACTOR_CLAUSE.match(part)]


def _classify(written: str) -> tuple[list[str], list[str]]:
    """(the facts the clause states, the behaviour it describes)."""
    clause = conduct.without_opener(written)  # "If the customer is angry, apologise first"
    actor = _ACTOR_CLAUSE.match(clause)
    first = conduct.instruction_verb(clause)
    # "...; directs them", "Explains that...", and the instruction "Tell the customer that...".
    continues = first in _ACTIONS or first in conduct.ACTIONS_MORE or first in _REPORTING
    if actor is None and (_BARE_BEHAVIOUR.match(clause) or _CASE_SUBJECT.match(clause)):
        return [], [written]
    if actor is None and conduct.describes_behaviour(clause):
        return [], [written]
    if actor is None and not continues:
        return [written], []
    rest = actor.group("rest") if actor else clause
    verb, _, reported = rest.partition(" ")
    verb = verb.lower().strip(".,;:!?")
    if verb in _TELLING or verb == "tell":
        reported = _OBJECT.sub("", reported.strip(), count=1)
    reported = _AUDIENCE.sub("", reported.strip(), count=1).strip()
    if verb not in _REPORTING or not reported or _ABSTRACT.match(reported) or _reports_behaviour(reported):
        return [], [written]
    facts, behaviour = [], []
    # "explains X, so the customer is eligible": X is a fact, the conclusion is about this case.
    for part in _CONCLUSION.split(reported):
        part = part.strip(" ,.")
        if _CONCLUSION.match(" " + part) or _CASE_SUBJECT.match(part) or not _states_something(part):
            behaviour.append(part)
        elif part:
            facts.append(part)
    return facts, behaviour


def _reports_behaviour(reported: str) -> bool:
    """What a reporting verb reports is behaviour: how ("answers in Spanish", "only from the
    documents"), the agent's own doing ("says it cannot help"), or a second act ("...and
    suggests contacting support")."""
    if conduct.REPORTED_MANNER.match(reported) or conduct.REPORTED_SELF.match(reported):
        return True
    words = {word.lower().strip(".,;:!?") for word in reported.split()}
    return bool(words & _SECOND_ACTS)


def _states_something(text: str) -> bool:
    return bool(_STATEMENT.search(text)) or any(term[0].isdigit() for term in fact_terms(text))
