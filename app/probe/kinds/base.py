"""The contract every probe kind keeps (``ProbeKind``), and what its reader writes into."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import httpx

from app.probe.phases import Breakdown
from app.probe.readers import BodyReader, Findings
from app.probe.sample import Marks, ServerTiming
from app.probe.spec import Kind


@dataclass(slots=True)
class Answer:
    """Where a kind's reader puts what it learns from one answer."""

    marks: Marks  # the sample's marks: the reader sets the token marks
    findings: Findings  # token counts, server timings, an error the body reported
    limit: int  # bytes of body the reader may keep (``max_body_bytes``)


class ProbeKind(Protocol):
    """One kind of endpoint: one module under ``app/probe/kinds/``, named in ``KINDS``.

    The probe sends the target's request and times it the same way for every kind; it
    asks the kind how to read a good answer's body and how to split the time line into
    phases. Every kind keeps these contracts (``tests/probe/test_kinds.py`` checks each):

    * ``kind`` is its ``Kind`` and its key in ``KINDS``.
    * ``phases`` names every phase its breakdowns can hold, in time order.
    * ``follows_redirects``: a 3xx is followed hop by hop (else it is an error sample).
    * ``reader(response, answer)`` is asked once per final answer with a status below 400,
      its headers in, its body not yet read. The reader gets every body chunk at its
      arrival (``feed``), then ``close`` once. It keeps no more than ``answer.limit`` bytes
      (``BodyTooLarge`` past them), sets ``answer.marks``' token marks to the arrival of
      the chunk that carried them, adds token counts and server timings to
      ``answer.findings``, and raises ``ProbeError`` or ``StreamFormatError`` for an answer
      that breaks its protocol. ``reader.streaming`` says whether tokens arrive as made.
    * ``breakdown(marks, end_ns, server, rtt_ms, streaming=...)`` is pure. Its phases are
      drawn from ``phases`` in that order, each ≥ 0 with a provenance, and add up to
      ``end_ns`` (within 0.01 ms) whichever marks are missing, ``None`` ones included.
    """

    @property
    def kind(self) -> Kind: ...

    @property
    def phases(self) -> tuple[str, ...]: ...

    @property
    def follows_redirects(self) -> bool: ...

    def reader(self, response: httpx.Response, answer: Answer) -> BodyReader: ...

    def breakdown(
        self,
        marks: Marks,
        end_ns: int,
        server: ServerTiming,
        rtt_ms: float | None,
        *,
        streaming: bool,
    ) -> Breakdown: ...
