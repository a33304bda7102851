"""What the LLM kinds share: an answer streamed as server-sent events or sent whole as
JSON, split into connect, network, queue, prefill, generation and transfer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import httpx

from app.probe.facts import StreamFacts
from app.probe.kinds.base import Answer
from app.probe.phases import Breakdown, llm_phases
from app.probe.readers import BodyReader, JsonAnswerReader, StreamReader
from app.probe.sample import LLM_PHASES, Marks, ServerTiming
from app.probe.spec import Kind


@dataclass(frozen=True, slots=True)
class LlmKind:
    kind: Kind
    stream: Callable[[Answer], StreamReader]  # a reader for one stream of events
    body: Callable[[bytes], StreamFacts]  # the facts of one whole answer
    # A whole answer whose server did not say how long it generated has one server phase.
    phases: tuple[str, ...] = (*LLM_PHASES[:-1], "server", LLM_PHASES[-1])
    # They POST a body that a 301, 302 or 303 would turn into a GET.
    follows_redirects: bool = False

    def reader(self, response: httpx.Response, answer: Answer) -> BodyReader:
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            return self.stream(answer)
        return JsonAnswerReader(self.body, answer.findings, answer.limit)

    def breakdown(
        self,
        marks: Marks,
        end_ns: int,
        server: ServerTiming,
        rtt_ms: float | None,
        *,
        streaming: bool,
    ) -> Breakdown:
        return llm_phases(marks, end_ns, server, rtt_ms, streaming=streaming)
