"""What the probe learns from a response body while it arrives, chunk by chunk.

Readers keep marks for the tokens they see and never hold more of the body than they must:
a stream is decoded event by event, a JSON answer is kept up to a limit, anything else is
only counted.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from app.probe.cadence import FOLD_EVERY, Cadence
from app.probe.facts import StreamFacts
from app.probe.redact import Redactor
from app.probe.sample import Marks, ServerTiming, Tokens
from app.probe.sse import SSEDecoder, SSEEvent

ERROR_EXCERPT_BYTES = 64 * 1024


class ProbeError(Exception):
    """The response broke a rule of the probe or of its protocol."""


class BodyTooLarge(ProbeError):
    pass


class StreamReportedError(ProbeError):
    """The endpoint said, inside a 2xx stream, that the request failed."""


@dataclass(slots=True)
class Findings:
    tokens: Tokens = field(default_factory=Tokens)
    server_timing: ServerTiming = field(default_factory=ServerTiming)
    error: str | None = None
    cadence: Cadence = field(default_factory=Cadence)  # a stream's arrivals of tokens

    def add(self, facts: StreamFacts) -> None:
        if facts.tokens is not None:
            self.tokens.merge(facts.tokens)
        if facts.server_timing is not None:
            self.server_timing.merge(facts.server_timing)


class BodyReader(Protocol):
    """Reads one answer's body as it arrives: ``feed`` every chunk at its arrival time,
    ``close`` once after the last. ``streaming``: tokens arrive as they are made, so their
    marks time the generation (a whole answer's arrive at once, after it)."""

    streaming: bool

    def feed(self, chunk: bytes, now_ns: int) -> None: ...

    def close(self, now_ns: int) -> None: ...


class _Budget:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.seen = 0

    def spend(self, size: int) -> None:
        self.seen += size
        if self.seen > self.limit:
            raise BodyTooLarge(f"response body exceeded {self.limit} bytes")


class StreamReader:
    """Server-sent events: marks the first and last reasoning and answer tokens, and
    stamps every read that carried tokens (``Findings.cadence``)."""

    streaming = True

    def __init__(
        self,
        interpret: Callable[[SSEEvent], StreamFacts],
        marks: Marks,
        findings: Findings,
        limit: int,
        answer_chunk: Callable[[bytes], bool] | None = None,
    ) -> None:
        """``answer_chunk`` (``OpenAIEventReader.answer_chunk``) may say that a chunk is one
        whole ordinary answer event, which then skips the decoder and ``interpret``."""
        self.interpret = interpret
        self.marks = marks
        self.findings = findings
        self.budget = _Budget(limit)
        self.decoder = SSEDecoder()
        self.answer_chunk = answer_chunk
        self.stamps = findings.cadence.stamps  # a read of one token: appended here

    def feed(self, chunk: bytes, now_ns: int, *, last: bool = False) -> None:
        # Runs for every chunk inside the measured request, so written out in one frame:
        # _Budget.spend inlined, every event of the chunk read here.
        budget = self.budget
        budget.seen += len(chunk)
        if budget.seen > budget.limit:
            budget.spend(0)
        marks = self.marks
        answer_chunk = self.answer_chunk
        if answer_chunk is not None and self.decoder.between_events(chunk) and answer_chunk(chunk):
            if marks.first_answer_token is None:
                marks.first_answer_token = now_ns
            marks.last_answer_token = now_ns
            stamps = self.stamps  # Cadence.arrive(now_ns, 1, 0), written out
            stamps.append(now_ns)
            if len(stamps) >= FOLD_EVERY:
                self.findings.cadence.fold()
            return
        answers = reasonings = 0
        for event in self.decoder.close() if last else self.decoder.feed(chunk):
            facts = self.interpret(event)
            if facts.answer:
                answers += 1
                if marks.first_answer_token is None:
                    marks.first_answer_token = now_ns
                marks.last_answer_token = now_ns
            elif facts.reasoning:  # an event with both counts one token, an answer's
                reasonings += 1
            if facts.reasoning:
                if marks.first_reasoning_token is None:
                    marks.first_reasoning_token = now_ns
                marks.last_reasoning_token = now_ns
            if facts.tokens is not None or facts.server_timing is not None:
                self.findings.add(facts)  # the last chunk or two: usage and timings
            if facts.error is not None:
                self._arrive(now_ns, answers, reasonings)
                raise StreamReportedError(facts.error)
        if answers or reasonings:
            self.findings.cadence.arrive(now_ns, answers, reasonings)

    def _arrive(self, now_ns: int, answers: int, reasonings: int) -> None:
        if answers or reasonings:
            self.findings.cadence.arrive(now_ns, answers, reasonings)

    def close(self, now_ns: int) -> None:
        self.feed(b"", now_ns, last=True)


class JsonAnswerReader:
    """A whole (non-streaming) answer: kept up to the limit, read by ``parse`` when complete."""

    streaming = False

    def __init__(
        self, parse: Callable[[bytes], StreamFacts], findings: Findings, limit: int
    ) -> None:
        self.parse = parse
        self.findings = findings
        self.budget = _Budget(limit)
        self.parts: list[bytes] = []

    def feed(self, chunk: bytes, now_ns: int) -> None:
        self.budget.spend(len(chunk))
        self.parts.append(chunk)

    def close(self, now_ns: int) -> None:
        facts = self.parse(b"".join(self.parts))
        self.findings.add(facts)
        if facts.error is not None:
            raise StreamReportedError(facts.error)


class CountingReader:
    """A plain HTTP body: only its size matters."""

    streaming = False

    def __init__(self, limit: int) -> None:
        self.budget = _Budget(limit)

    def feed(self, chunk: bytes, now_ns: int) -> None:
        self.budget.spend(len(chunk))

    def close(self, now_ns: int) -> None:
        pass


class ErrorBodyReader:
    """An error response: the start of its body becomes the sample's error message."""

    streaming = False

    def __init__(self, findings: Findings, redactor: Redactor) -> None:
        self.findings = findings
        self.redactor = redactor
        self.parts: list[bytes] = []
        self.kept = 0

    @property
    def full(self) -> bool:
        return self.kept >= ERROR_EXCERPT_BYTES

    def feed(self, chunk: bytes, now_ns: int) -> None:
        self.parts.append(chunk[: ERROR_EXCERPT_BYTES - self.kept])
        self.kept += len(self.parts[-1])

    def close(self, now_ns: int) -> None:
        # A full reader stopped reading: the body may go on past what it kept.
        body = b"".join(self.parts)
        self.findings.error = error_excerpt(body, self.redactor, cut=self.full)


def error_excerpt(body: bytes, redactor: Redactor, *, cut: bool = False, limit: int = 300) -> str:
    """The message of an error body: ``error.message`` of a JSON error, else its text;
    secrets scrubbed before it is cut to ``limit`` (``cut``: the body itself was cut)."""
    text = body.decode("utf-8", "replace")
    if cut:
        text = redactor.scrub(text, cut_here=True)
    text = text.strip()
    try:
        payload = json.loads(text)
    except ValueError:
        return redactor.cut(text, limit)
    message = _error_message(payload)
    return redactor.cut(message if message is not None else text, limit)


def _error_message(payload: object) -> str | None:
    if not isinstance(payload, dict):
        return None
    error = payload.get("error", payload)
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    if isinstance(error, str):
        return error
    return None
