"""The model reads test cases out of prose, chunk by chunk, through the gateway.

Each chunk keeps "[Page N]" markers, and the model must quote the span a case
comes from; the page is then taken from where that span really is, with the
model's page number only as a fallback. Answers are validated against a JSON
schema by the gateway (one repair round); a chunk whose answer is still broken
fails the whole extraction, so a dataset never gets a partial set of cases.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError

from datasets.extraction.dedupe import NearDuplicates
from datasets.extraction.errors import ExtractionFailed
from datasets.extraction.prose import Chunk, chunk_pages, page_of, squash
from datasets.fields import case_field_errors, case_fields_clean
from datasets.generation.checks import case_problem, schema_words, shown
from evalsite import llm

MIN_CHUNK_CHARS = 1_500
MAX_FIELD_CHARS = 5_000
# A second try after a broken answer runs warmer, so it is not the same call again.
RETRY_TEMPERATURE = 0.5

CASES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "cases": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "question": {"type": "string"},
                    "expected_answer": {"type": "string"},
                    "source_span": {"type": "string"},
                    "page": {"type": ["integer", "null"]},
                    "tests_rule": {"type": "string"},
                },
                "required": ["question", "expected_answer", "source_span"],
            },
        }
    },
    "required": ["cases"],
}

SYSTEM_PROMPT = """You turn documents into test cases for evaluating an AI assistant that answers questions about them.
The document text may list test cases itself (questions with expected answers), or describe rules, policies,
procedures and scenarios. In the first case copy every listed case. In the second, write the questions a real
user would ask that each rule or scenario answers, with the answer the document supports.

Rules:
- Use only facts stated in the text. Never invent numbers, names or policies.
- expected_answer: what a correct assistant answers, in one to three sentences.
- source_span: the exact sentence(s) from the text that support the case, copied verbatim.
- page: the number from the nearest "[Page N]" marker before the span, or null when there are no markers.
- tests_rule: a few words naming the rule or scenario tested.
- Skip tables of contents, headers, footers and boilerplate. Return {"cases": []} when the text holds nothing testable.

Reply with JSON only:
{"cases": [{"question": "...", "expected_answer": "...", "source_span": "...", "page": 1, "tests_rule": "..."}]}"""


@dataclass
class LLMExtraction:
    cases: list[dict[str, Any]]
    more_than_limit: bool  # the model found more cases than max_cases; the first ones were kept
    # Cases the model wrote that were dropped, each saying why: the model's fault, not the file's.
    rejected: list[str] = field(default_factory=list)

    def warnings(self) -> list[dict[str, str]]:
        """The dropped cases as dataset warnings, naming the model that wrote them."""
        where = f"Written by the model {llm.model_for('llm') or ''}".rstrip()
        return [{"where": where, "message": message} for message in self.rejected]


def extract_with_model(
    pages: list[tuple[int | None, str]], *, max_cases: int, trace: dict[str, str | int]
) -> LLMExtraction:
    if not llm.is_configured("llm"):
        raise ExtractionFailed(
            "No test cases found in tables or as labelled questions, and reading cases from prose needs a model. "
            "Connect a model (set EVALSITE_LLM_MODEL), or upload a spreadsheet with a Question column."
        )
    chunks = chunk_pages(pages, max_chars=settings.EVALSITE_EXTRACT_CHUNK_CHARS)
    if not chunks:
        raise ExtractionFailed("The document has no text to read test cases from.")
    # A few chunks at a time (the gateway is thread-safe); results are read in chunk order.
    pool = ThreadPoolExecutor(max_workers=settings.EVALSITE_EXTRACT_CONCURRENCY)
    try:
        futures = [pool.submit(_read_chunk, chunk, {**trace, "chunk": index}) for index, chunk in enumerate(chunks)]
        answers = [future.result() for future in futures]
    finally:
        # After a failed chunk the dataset fails anyway: don't pay for the chunks not yet sent.
        pool.shutdown(wait=True, cancel_futures=True)
    squashed = {page: squash(text) for page, text in pages if page is not None}
    seen = NearDuplicates()
    result = LLMExtraction(cases=[], more_than_limit=False)
    for chunk, found in zip(chunks, answers, strict=True):
        for item in found:
            case = _case(item, chunk, squashed)
            if problem := _case_problem(case):
                result.rejected.append(f"A case the model read{_from_pages(chunk)} was dropped: {problem.rstrip('.')}.")
                continue
            if not seen.is_new(case["question"]):
                continue
            if len(result.cases) == max_cases:
                result.more_than_limit = True
                return result
            result.cases.append(case)
    if not result.cases and result.rejected:
        raise ExtractionFailed(_all_rejected(result))
    return result


# What a weak model echoes back instead of reading the document.
_OWN_WORDS = [SYSTEM_PROMPT, *schema_words(CASES_SCHEMA)]


def _case_problem(case: dict[str, Any]) -> str:
    """Why a case the model wrote cannot be kept, or "": the garbage checks that generation
    uses, then the same field checks a saved case passes (a tests rule on several lines
    failed the whole dataset once, blamed on the user's file)."""
    if problem := case_problem(case["question"], case["expected_answer"], own_words=_OWN_WORDS):
        return problem
    fields = {name: case[name] for name in ("question", "expected_answer", "document_context", "tests_rule")}
    try:
        case_fields_clean(fields)
    except ValidationError as exc:
        return "; ".join(case_field_errors(f"the case {shown(case['question'])}", exc))
    return ""


def _from_pages(chunk: Chunk) -> str:
    if not chunk.pages:
        return ""
    first, last = min(chunk.pages), max(chunk.pages)
    return f" from page {first}" if first == last else f" from pages {first}-{last}"


def _all_rejected(result: LLMExtraction) -> str:
    model = llm.model_for("llm") or "the model"
    first = result.rejected[0].split(" was dropped: ", 1)[-1].rstrip(".")
    return (
        f"The model {model} wrote {len(result.rejected)} test case{'s' if len(result.rejected) != 1 else ''} "
        f"from the document and none could be used (for example {first}). This is the model's answer, not a "
        "problem in your file: try again, or choose a stronger model."
    )


def _read_chunk(chunk: Chunk, trace: dict[str, str | int], *, retried: bool = False) -> list[dict[str, Any]]:
    """The cases the model finds in one chunk. A chunk too long for the model is halved and
    retried; an answer cut at max_tokens or still broken after its repair is asked again once,
    differently (the chunk halved, or the same chunk at another temperature), never identically."""
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": chunk.text}]
    temperature = RETRY_TEMPERATURE if retried else 0
    try:
        result = llm.complete_json(messages, schema=CASES_SCHEMA, task="extract", temperature=temperature, trace=trace)
    except llm.LLMError as error:
        splittable = len(chunk.text) >= 2 * MIN_CHUNK_CHARS
        if error.kind == "context_window" and splittable:
            return [case for half in _halves(chunk) for case in _read_chunk(half, trace, retried=retried)]
        if error.kind in ("truncated", "invalid_json") and not retried:
            if splittable:
                return [case for half in _halves(chunk) for case in _read_chunk(half, trace, retried=True)]
            return _read_chunk(chunk, trace, retried=True)
        raise ExtractionFailed(_model_failure(error)) from error
    assert result.data is not None  # complete_json returns only an answer that matched the object schema
    return list(result.data["cases"])


def _halves(chunk: Chunk) -> list[Chunk]:
    pieces = chunk_pages([(None, chunk.text)], max_chars=len(chunk.text) // 2 + 1)
    return [Chunk(text=piece.text, pages=chunk.pages) for piece in pieces]


def _case(item: dict[str, Any], chunk: Chunk, squashed: dict[int, str]) -> dict[str, Any]:
    question = item["question"].strip()[:MAX_FIELD_CHARS]
    span = item["source_span"].strip()[:MAX_FIELD_CHARS]
    claimed = item.get("page")
    page = page_of(span, squashed, chunk.pages) if chunk.pages else None
    if page is None and isinstance(claimed, int) and claimed in chunk.pages:
        page = claimed
    return {
        "question": question,
        "expected_answer": item["expected_answer"].strip()[:MAX_FIELD_CHARS],
        "case_id": "",
        "document_context": span,
        "judge_guideline": "",
        "tags": [],
        "tests_rule": str(item.get("tests_rule") or "").strip()[:300],
        "location": f"page {page}" if page else "",
        "span": span,
    }


def _model_failure(error: llm.LLMError) -> str:
    if error.kind == "truncated" and (context := _cut_by_context(error)):
        return context
    if error.kind == "truncated":
        return f"{error.message} Try again with fewer pages, or raise EVALSITE_LLM_MAX_TOKENS_EXTRACT."
    if error.kind == "invalid_json":
        return (
            "The model's answer could not be read as test cases, even after asking it to correct itself. "
            "Try again, or choose a stronger model."
        )
    return f"The model could not read the document: {error.message} Try again in a few minutes."


def _cut_by_context(error: llm.LLMError) -> str:
    """The reason when the server stopped the answer before our limit: its context was full
    (llama.cpp silently lowers max_tokens to the room left after the prompt)."""
    spent = error.result
    if spent is None or not spent.max_tokens or spent.completion_tokens >= spent.max_tokens:
        return ""
    used = spent.prompt_tokens + spent.completion_tokens
    return (
        f"The model's answer was cut after {spent.completion_tokens} tokens, before the {spent.max_tokens} "
        f"allowed for reading a document: the model server's context was full ({spent.prompt_tokens} tokens of "
        f"prompt and {spent.completion_tokens} of answer, {used} in all). Start the server with a larger context "
        f"(at least {spent.prompt_tokens + spent.max_tokens} tokens, e.g. llama.cpp's --n_ctx 8192), or lower "
        "EVALSITE_EXTRACT_CHUNK_CHARS and EVALSITE_LLM_MAX_TOKENS_EXTRACT so a chunk and its answer fit."
    )
