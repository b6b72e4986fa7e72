"""Small text helpers shared by the offline scorer, de-duplication and suggestions."""

import re

_WORD = re.compile(r"[a-z0-9]+(?:[.,'][a-z0-9]+)*")
# Words that carry no meaning on their own; ignored when comparing facts.
STOPWORDS = frozenset(
    """a an and are as at be been but by can could do does for from has have how i if in into is it its
    may more most no not of on or our should so than that the their them then there these they this to
    was we were what when where which who will with would you your yes please also any all""".split()
)


def tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


_POSSESSIVE = re.compile(r"['’]s?$")


def stem(token: str) -> str:
    # Just enough folding that "refunds" finds "refund" and "cancelled" finds "cancel".
    for suffix in ("ies", "ing", "ed", "es", "s"):
        if len(token) > len(suffix) + 2 and token.endswith(suffix):
            return token[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return token


def content_terms(text: str) -> list[str]:
    """The text's words without stopwords, folded by `stem`: what retrieval and rule coverage compare."""
    # A possessive is its word: "customer's" is "customer".
    words = (_POSSESSIVE.sub("", token) for token in tokens(text))
    return [stem(word) for word in words if word and word not in STOPWORDS]


def content_tokens(text: str) -> set[str]:
    return {token for token in tokens(text) if token not in STOPWORDS}


def jaccard(a: str, b: str) -> float:
    left, right = content_tokens(a), content_tokens(b)
    if not left and not right:
        return 1.0
    return len(left & right) / len(left | right)


def key_points(text: str) -> list[str]:
    """Split an expected answer into the facts it states: sentences, list items, or semicolon clauses."""
    parts = re.split(r"(?<=[.!?])\s+|\n+|;\s*", text.strip())
    return [part.strip(" -*•\t") for part in parts if len(content_tokens(part)) >= 2 or _has_number(part)]


def point_covered(point: str, answer: str, *, threshold: float = 0.6) -> bool:
    """A point is covered when most of its content words (and all of its numbers) are in the answer.

    Words are compared as facts (`fact_terms`): "fourteen" is 14, "$30" and "30 dollars" are 30,
    "refundable" and "refunded" are "refund". A point that denies what the answer affirms (or
    the reverse) is not covered: "not refundable" is not "refundable".
    """
    wanted = set(fact_terms(point))
    if not wanted:
        return True
    found = set(fact_terms(answer))
    required = _required_numbers(point)
    if not required <= found:
        return False
    if required:  # every figure the point states is there: the strongest evidence, so fewer words do
        threshold = min(threshold, NUMBERED_THRESHOLD)
    names = _names(point)
    if names and 2 * len(names & found) < len(names):  # "EU (Frankfurt)" is not "US (Virginia)"
        return False
    if len(wanted & found) / len(wanted) < threshold:
        return False
    return _same_polarity(point, answer)


# ---- comparing facts (the offline scorer) ---------------------------------------------

_NUMBER_WORDS = {
    word: value
    for value, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen twenty".split()
    )
} | {"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
_TENS = frozenset({"twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"})
# Words that say how a figure is written, not what it is: "$30" is "30 dollars", "20%" is "20 percent".
_FACT_STOPWORDS = STOPWORDS | frozenset(
    """dollar dollars usd eur euro euros gbp pound pounds percent per cent a each just only about
    within up you i we us customer customers user users""".split()
)
# Suffixes folded away, longest first, so "refundable", "refunded" and "refunds" are one word.
_FACT_SUFFIXES: tuple[str, ...] = ("ibility", "ability", "ations", "ation", "ments", "ment", "able", "ible")
_FACT_SUFFIXES += ("ness", "ing", "ies", "ed", "es", "ly", "s")
_NEGATIONS = frozenset({"not", "no", "never", "non", "cannot", "can't", "isn't", "aren't", "won't", "without"})
_NEGATIONS |= frozenset({"doesn't", "don't", "didn't", "wasn't", "weren't", "nothing", "none", "neither", "nor"})
_ADDRESS = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+|https?://\S+|www\.\S+", re.IGNORECASE)
# A few words customers and test plans use for the same thing.
_SYNONYMS = {"yearly": "annual", "annually": "annual", "year": "annual", "bought": "buy", "buying": "buy"}
_SYNONYMS |= {"purchase": "buy", "purchased": "buy", "purchases": "buy", "price": "cost", "priced": "cost"}
# The share of a point's words an answer needs when it gives every figure the point states.
NUMBERED_THRESHOLD = 0.5
# How many fact words after "not", "no" or "never" it denies: "no credit card is required".
NEGATION_REACH = 3
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")


def fact_terms(text: str) -> list[str]:
    """The words that carry a fact, normalised so that the same fact written differently compares equal."""
    # An address is one exact term, like a figure: "billing@acme.example" is not "billing".
    terms: list[str] = [address.lower().rstrip(".") for address in _ADDRESS.findall(text)]
    words = [_POSSESSIVE.sub("", word) for word in tokens(_ADDRESS.sub(" ", text).replace("’", "'"))]
    for index, word in enumerate(words):
        if word in _TENS and index + 1 < len(words) and 0 < _NUMBER_WORDS.get(words[index + 1], 0) < 10:
            continue  # "twenty four": the next word adds its unit to this ten
        if word in _NUMBER_WORDS:
            previous = words[index - 1] if index else ""
            terms.append(str(_NUMBER_WORDS[word] + (_NUMBER_WORDS[previous] if previous in _TENS else 0)))
        elif word and word[0].isdigit():
            # "50gb" is "50 gb", "10am" is "10 am"; "30th" and "1.2" stay whole.
            unit = re.fullmatch(r"(\d+)([a-z]{2,})", word)
            terms += [_number(unit.group(1)), _fact_stem(unit.group(2))] if unit else [_number(word)]
        elif word and word not in _FACT_STOPWORDS and word not in _NEGATIONS:
            terms.append(_SYNONYMS.get(word) or _fact_stem(word))
    return terms


def _number(token: str) -> str:
    """ "1,000" is 1000, "79.00" is 79, "08" is 8, "30th" stays as written."""
    token = token.replace(",", "")
    if re.fullmatch(r"\d+\.\d+", token):
        token = token.rstrip("0").rstrip(".")
    return token.lstrip("0") or "0" if token.isdigit() else token


def _fact_stem(word: str) -> str:
    for suffix in _FACT_SUFFIXES:
        # "monthly" is "month", but "apply" keeps its "ly".
        if len(word) >= len(suffix) + (4 if suffix == "ly" else 3) and word.endswith(suffix):
            word = word[: -len(suffix)] + ("y" if suffix == "ies" else "")
            break
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiou":
        word = word[:-1]  # "cancelled" and "cancel", "stopped" and "stop"
    return word[:-1] if len(word) > 3 and word.endswith("e") else word  # "purchase" and "purchased"


def _required_numbers(point: str) -> set[str]:
    """The figures and addresses a point states, each of which the answer must give. "One" is left out: it is
    as often a pronoun ("the one with SSO") as a figure."""
    terms = fact_terms(re.sub(r"\bone\b", " ", point.lower()))
    return {term for term in terms if term[0].isdigit() or "@" in term or "/" in term}


def _names(point: str) -> set[str]:
    """The names a point states (capitalised inside a sentence, or an acronym), as fact terms."""
    names = set()
    for sentence in _sentences(point):
        words = re.findall(r"[A-Za-z][A-Za-z0-9-]*", sentence)
        names |= {word for word in words[1:] if word[0].isupper() and word != "I"}
        names |= {word for word in words[:1] if len(word) > 1 and word.isupper()}
    return {term for name in names for term in fact_terms(name)}


def _same_polarity(point: str, answer: str) -> bool:
    """What the point denies, the answer denies too; what it affirms, the answer does not only deny."""
    point_denied, point_affirmed = _polarity(point)
    answer_denied, answer_affirmed = _polarity(answer)
    if point_denied and not point_denied & answer_denied:
        return False
    return not (point_affirmed & answer_denied) - answer_affirmed


def _polarity(text: str) -> tuple[set[str], set[str]]:
    """(the fact terms a negation governs, the others): "are not refundable" denies "refund"."""
    denied: set[str] = set()
    affirmed: set[str] = set()
    for sentence in _sentences(text):
        window = 0
        for word in re.findall(r"[a-z0-9]+(?:'[a-z]+)?", sentence.lower().replace("’", "'")):
            if word in _NEGATIONS or word.endswith("n't"):
                window = NEGATION_REACH
                continue
            terms = fact_terms(word)
            if not terms:
                continue
            (denied if window else affirmed).update(terms)
            window = max(0, window - 1)
    return denied, affirmed


def _sentences(text: str) -> list[str]:
    return [part for part in _SENTENCE.split(text) if part.strip()]


def _has_number(text: str) -> bool:
    return any(ch.isdigit() for ch in text)


# How an expected answer says "the agent should not know / should decline" (lower case).
_REFUSAL = re.compile(
    r"\b(?:does not|doesn't|do not|don't|cannot|can't|can not|is not able to|isn't able to|unable to)\s+"
    # Not "include", "cover", "provide": "Refunds do not include shipping" is a fact to learn.
    r"(?:say|state|mention|specify|know|answer)\b"
    r"|\bno information\b|\bnot (?:mentioned|covered|stated|specified) in\b|\b(?:i'm|i am) sorry\b"
    r"|\bshould (?:decline|refuse)\b"
)


def is_refusal(expected: str) -> bool:
    """The expected answer is a refusal ("The knowledge does not say...", "I don't know")."""
    return bool(_REFUSAL.search(expected.lower().replace("’", "'")))


def contains_nul(value: object) -> bool:
    """Whether a decoded JSON value holds a NUL character anywhere (PostgreSQL cannot store one in text)."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(contains_nul(key) or contains_nul(item) for key, item in value.items())
    if isinstance(value, list):
        return any(contains_nul(item) for item in value)
    return False


def cut(text: str, limit: int) -> str:
    """`text` stripped, and cut to at most `limit` characters with an ellipsis when longer."""
    text = (text or "").strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


# ROUGE-L is quadratic in length: longer texts are compared on their first tokens.
ROUGE_MAX_TOKENS = 1_500


def rouge_l(candidate: str, reference: str) -> float:
    """ROUGE-L F1: the longest common subsequence of words, as precision and recall."""
    cand, ref = tokens(candidate)[:ROUGE_MAX_TOKENS], tokens(reference)[:ROUGE_MAX_TOKENS]
    if not cand or not ref:
        return 0.0
    previous = [0] * (len(ref) + 1)
    for word in cand:
        current = [0]
        for j, ref_word in enumerate(ref, 1):
            current.append(previous[j - 1] + 1 if word == ref_word else max(previous[j], current[j - 1]))
        previous = current
    lcs = previous[-1]
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(cand), lcs / len(ref)
    return 2 * precision * recall / (precision + recall)
