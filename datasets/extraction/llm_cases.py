"""The model reads test cases out of prose, chunk by chunk, through the gateway.

Each chunk keeps "[Page N]" markers, and the model must quote the span a case
comes from; the page is then taken from where that span really is, with the
model's page number only as a fallback. Answers are validated against a JSON
schema by the gateway (one repair round); a chunk whose answer is still broken
fails the whole extraction, so a dataset never gets a partial set of cases.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from datasets.extraction.dedupe import NearDuplicates
from datasets.extraction.errors import ExtractionFailed
from datasets.extraction.prose import Chunk, chunk_pages, page_of, squash
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
    kept: list[dict[str, Any]] = []
    for chunk, found in zip(chunks, answers, strict=True):
        for item in found:
            case = _case(item, chunk, squashed)
            if case is None or not seen.is_new(case["question"]):
                continue
            if len(kept) == max_cases:
                return LLMExtraction(cases=kept, more_than_limit=True)
            kept.append(case)
    return LLMExtraction(cases=kept, more_than_limit=False)


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


def _case(item: dict[str, Any], chunk: Chunk, squashed: dict[int, str]) -> dict[str, Any] | None:
    question = item["question"].strip()[:MAX_FIELD_CHARS]
    if len(question) < 3:
        return None
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
    if error.kind == "truncated":
        return f"{error.message} Try again with fewer pages, or raise EVALSITE_LLM_MAX_TOKENS_EXTRACT."
    if error.kind == "invalid_json":
        return (
            "The model's answer could not be read as test cases, even after asking it to correct itself. "
            "Try again, or choose a stronger model."
        )
    return f"The model could not read the document: {error.message} Try again in a few minutes."
