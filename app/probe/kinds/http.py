"""``kind: http``: any HTTP endpoint; its body is only counted. Phases: connect, network,
server, transfer; redirects are followed and their hops are the server's time."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from app.probe.kinds.base import Answer
from app.probe.phases import Breakdown, http_phases
from app.probe.readers import BodyReader, CountingReader
from app.probe.sample import HTTP_PHASES, Marks, ServerTiming
from app.probe.spec import Kind


@dataclass(frozen=True, slots=True)
class HttpKind:
    kind: Kind = Kind.HTTP
    phases: tuple[str, ...] = HTTP_PHASES
    follows_redirects: bool = True

    def reader(self, response: httpx.Response, answer: Answer) -> BodyReader:
        return CountingReader(answer.limit)

    def breakdown(
        self,
        marks: Marks,
        end_ns: int,
        server: ServerTiming,
        rtt_ms: float | None,
        *,
        streaming: bool,
    ) -> Breakdown:
        return http_phases(marks, end_ns, server, rtt_ms)


HTTP = HttpKind()
