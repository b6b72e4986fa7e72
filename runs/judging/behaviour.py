"""Words that mark an expected answer's clause as behaviour, not a fact (runs/judging/offline_scorer.py).

A test plan writes behaviour in many forms besides "The agent should ...": an instruction with no
subject ("Apologise and offer to escalate", "Do not mention competitors", "Keep it under three
sentences"), a duty after a condition ("If the customer is angry, apologise first"), a label
("Tone: friendly"), a description of the reply ("The tone should be warm", "Response is friendly
and brief"), or a phrase with no verb ("A polite refusal", "No jargon"). None of them can be
checked by matching words, so each is left to a judge model.

An instruction addressed to the customer is content, not behaviour: "Go to Settings > Security",
"Send us your order number", "Use the promo code SAVE20" are what the answer must say. An
instruction counts as behaviour when its verb is one a reply does but a customer is not told
to do (apologise, escalate, greet...), or when its verb could be either (ask, send, use...) and
it names no "you"/"your" and carries no figure or name the answer could repeat.
"""

from __future__ import annotations

import re

# Verbs an instruction gives the agent and never the customer (base forms, both spellings).
_AGENT_VERBS = frozenset(
    """apologise apologize greet thank escalate decline refuse reassure empathise empathize acknowledge
    summarise summarize be avoid stay remain keep respond reply answer redirect transfer hand cite admit
    resist ignore handle de-escalate deescalate push address end close repeat speak write format offer
    recommend suggest direct guide express show match sound adopt maintain treat warn flag collect gather
    identify probe clarify refrain stop ensure mirror personalise personalize validate empathise comfort
    calm upsell promote let invite encourage advise walk point urge nudge coach educate persuade
    mention explain tell inform remind state say note confirm describe reference""".split()
)
# Verbs an instruction may give either (the customer's steps are content): behaviour only when
# the clause names no "you" and no figure or name.
_EITHER_VERBS = frozenset(
    """ask verify provide give include send use open create log look call check contact email share
    request try make help list return output limit restrict search find get""".split()
)
# Verbs a reporting instruction uses: what follows is the fact the answer must state, as in
# "Agent explains that..." (offline_scorer handles it).
REPORTING_BASE = frozenset(
    "explain say state tell confirm inform mention answer reply respond note clarify remind".split()
)
# Third-person verbs of what a reply does, beyond offline_scorer's _ACTIONS.
ACTIONS_MORE = frozenset(
    """sounds matches cites addresses ends closes repeats upsells resists de-escalates deescalates admits
    writes speaks returns outputs stays remains refrains stops mirrors personalises personalizes validates
    comforts calms promotes hallucinates invents speculates follows ignores obeys complies keeps does doesn't
    never always avoids uses""".split()
)
# Adjectives, nouns and phrases of manner, tone, format and length.
_STYLE = re.compile(
    r"\b(?:polite(?:ly|ness)?|impolite|friendl(?:y|iness)|brief(?:ly)?|concise(?:ly)?|short|succinct|terse|"
    r"warm(?:ly|th)?|empath\w*|sympath\w*|professional(?:ly|ism)?|courteous(?:ly)?|helpful(?:ly)?|clear(?:ly)?|"
    r"tone|style|voice|apolog\w*|greeting|refusal|jargon|blame|mention|sweet|formal(?:ly)?|informal(?:ly)?|"
    r"casual(?:ly)?|neutral(?:ly)?|calm(?:ly)?|respectful(?:ly)?|rude(?:ly|ness)?|kind(?:ly|ness)?|gentle|gently|"
    r"patient(?:ly)?|honest(?:ly|y)?|step-by-step|bullet(?:ed|s)?|numbered|markdown|json|table|paragraphs?|"
    r"sentences?|words|wording|emojis?|sarcas\w*|humou?r|robotic|behaviou?r|manner|attitude|condescending|"
    r"patroni[sz]ing|pushy|upsell\w*|escalat\w*|reassur\w*|verbose|wordy|waffle|rambling|on[- ]topic|"
    r"off[- ]topic|throughout|straight|to the point|direct(?:ly)?|plain language|second person|first person|"
    r"non-committal|supportive|confident)\b",
    re.IGNORECASE,
)
# A label that names what the rest describes: "Tone: friendly", "Expected behaviour: escalates".
_LABEL = re.compile(
    r"^(?:expected\s+)?(?:behaviou?r|tone|style|format|formatting|length|language|manner|voice|approach|"
    r"action|actions|response style|persona|register)\s*:",
    re.IGNORECASE,
)
# A description of the reply itself: its tone or format always, its whole only with a style word.
_REPLY_PART = re.compile(
    r"^(?:the\s+|its\s+|a\s+)?(?:tone|style|format|formatting|length|wording|language|voice|register)\b", re.I
)
_REPLY = re.compile(
    r"^(?:the\s+|its\s+|an?\s+)?(?:response|reply|answer|output|message)\s+"
    r"(?:is|are|should|must|will|shall|needs to|has to|reads|sounds|feels|stays|remains|be|contains|includes)\b",
    re.IGNORECASE,
)
# "It should apologise", "It admits it does not know": the agent, as "it", before a duty or an act.
_IT_ACTOR = re.compile(
    r"^(?:it|the\s+(?:model|ai|llm|bot|virtual\s+assistant|voice\s+assistant|ai\s+assistant|copilot|"
    r"representative|rep|support\s+rep|advisor|adviser|operator))\s+"
    r"(?:(?:should|must|will|shall|would|needs to|has to|ought to|is expected to|is supposed to)\b|"
    r"(?:apologi[sz]es|admits|declines|refuses|asks|escalates|greets|thanks|says|explains|tells|responds|"
    r"replies|answers|suggests|recommends|redirects|directs|acknowledges|stays|remains|avoids|does not|admits|"
    r"pretends|hallucinates|invents|guesses|speculates|"
    r"doesn't|never)\b)",
    re.IGNORECASE,
)
# Words that open a duty and are dropped to read the instruction after them.
_OPENER = re.compile(
    r"^(?:(?:it\s+is|it's)\s+(?:important|essential|crucial|vital|key|expected|required)\s+(?:that|to)\s+|"
    r"ideally,?\s+|preferably,?\s+|please\s+|make\s+sure\s+(?:to\s+|that\s+)?|be\s+sure\s+to\s+|"
    r"remember\s+to\s+|don't\s+forget\s+to\s+|do\s+not\s+forget\s+to\s+|"
    r"(?:only|also|then|first|always)\s+(?=[a-z]+\b)|"
    r"(?:if|when|whenever|once|before|after|unless|while|without|upon|on|in|at|during|for|as|throughout|with|by)"
    r"\b[^,]{0,120},\s*)",
    re.IGNORECASE,
)
# A duty with no subject: "Don't ...", "Shouldn't ...", "Will hand over ...".
_BARE_DUTY = re.compile(
    r"^(?:do\s+not|don't|does\s+not|doesn't|never|avoid|avoids|refrain|shouldn't|mustn't|should\s+not|"
    r"will\s+not|won't|would\s+not|wouldn't|cannot\s+be|"
    r"must\s+not|ought\s+to|is\s+supposed\s+to|no\s+need\s+to)\b",
    re.IGNORECASE,
)
_WILL = re.compile(r"^(?:will|would|won't)\s+(?P<verb>[a-z-]+)", re.IGNORECASE)
# Participles that describe the reply: "Written in the second person", "Phrased as a question".
_PARTICIPLE = re.compile(r"^(?:written|phrased|worded|formatted|delivered|addressed|kept|structured)\b", re.I)
# The customer as the one acted on: "Customer is asked for their email" ("the customer ..." is
# offline_scorer's _CASE_SUBJECT).
_CUSTOMER_PATIENT = re.compile(
    r"^(?:customer|user|caller|client|requester)\s+(?:is|was|gets|receives|should|must|will|shall|can|"
    r"cannot|needs|has|may|would)\b",
    re.IGNORECASE,
)
_PHRASE_STARTS = frozenset(
    """the a an this that these those them him her it its their his my any all every each some no to for of
    with if when in on at by from about before after without up back out down over as politely""".split()
)
_SECOND_PERSON = re.compile(r"\b(?:you|your|yours|yourself|us|our)\b", re.IGNORECASE)
# A finite verb: the clause states something ("no credit card is required").
_FINITE = re.compile(
    r"\b(?:is|are|was|were|be|been|can|cannot|can't|will|won't|has|have|had|must|may|might|does|do|doesn't|"
    r"don't|did|should|shall|would|could|needs?|takes?|costs?|includes?|requires?|stays?|gets?|lasts?|"
    r"offers?|accepts?|expires?|applies|apply|opens?|closes?|ships?|runs?|starts?|ends?)\b",
    re.IGNORECASE,
)
# What the answer could repeat word for word: a figure, a code, or a name inside the clause.
_CHECKABLE = re.compile(r"\d|\b[A-Z][A-Za-z0-9]*[A-Z0-9]\b|(?<=\s)[A-Z][a-z]+|[>@/]")
# After a reporting verb, words that say how rather than what: "answers in Spanish", "only from".
REPORTED_MANNER = re.compile(
    r"^(?:in|with|within|using|via|by|from|without|only|politely|briefly|clearly|kindly|calmly|"
    r"correctly|accurately|honestly|directly|appropriately|respectfully|concisely)\b",
    re.IGNORECASE,
)
# The agent as the subject of what it reports: "says it cannot help" reports a refusal.
REPORTED_SELF = re.compile(r"^(?:it|i|we|the\s+(?:agent|bot|assistant|chatbot|model))\b", re.IGNORECASE)


def without_opener(clause: str) -> str:
    """The clause after the words that open a duty: "If angry, apologise" is "apologise"."""
    for _ in range(3):  # "Ideally, if asked, ..." opens twice
        shorter = _OPENER.sub("", clause, count=1).strip()
        if shorter == clause or not shorter:
            return clause
        clause = shorter
    return clause


def describes_behaviour(clause: str) -> bool:
    """Whether a clause with no named agent describes what a reply does, how it sounds or how it is laid out."""
    if _LABEL.match(clause) or _REPLY_PART.match(clause) or _IT_ACTOR.match(clause):
        return True
    if _BARE_DUTY.match(clause) or _PARTICIPLE.match(clause) or _CUSTOMER_PATIENT.match(clause):
        return True
    if _REPLY.match(clause) and _STYLE.search(clause):
        return True
    will = _WILL.match(clause)
    if will and will.group("verb").lower() in (_AGENT_VERBS | _EITHER_VERBS) - {"be"}:
        return True
    if is_instruction(clause):
        return True
    if instruction_verb(clause) in REPORTING_BASE:
        return False  # "Mention the 14-day refund window": offline_scorer reads what it reports
    # A phrase with no verb, of manner, tone or format: "A polite refusal", "No jargon", "Brief."
    return not _FINITE.search(clause) and bool(_STYLE.search(clause))


def is_instruction(clause: str) -> bool:
    """An instruction to the agent with no subject: "Apologise and offer to escalate"; not one to the
    customer ("Send us your order number", "Use the promo code SAVE20")."""
    first = instruction_verb(clause)
    if first in REPORTING_BASE:
        return False  # offline_scorer reads what it reports
    rest = clause.split(maxsplit=1)[1] if " " in clause else ""
    if first in _AGENT_VERBS:  # "Let us know your order number" is the customer's step
        return not _noun_then_verb(rest) and not (first == "let" and _SECOND_PERSON.search(rest))
    if first in _EITHER_VERBS:
        return not _noun_then_verb(rest) and not _SECOND_PERSON.search(clause) and not _CHECKABLE.search(rest)
    return False


def _noun_then_verb(rest: str) -> bool:
    """The first word was a noun: a finite verb follows it within a few words, before any word that
    starts an object or a phrase ("Address changes take 2 days", not "Offer alternatives if ...")."""
    previous = ""
    for word in rest.split()[:4]:
        word = word.lower().strip(".,;:!?\"'")
        if _FINITE.fullmatch(word) and previous not in ("and", "or"):  # "Apologise and offer ..."
            return True
        if word in _PHRASE_STARTS:
            return False
        previous = word
    return False


def instruction_verb(clause: str) -> str:
    words = clause.split(maxsplit=1)
    return words[0].lower().strip(".,;:!?\"'") if words else ""
