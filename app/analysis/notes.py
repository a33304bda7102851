"""What a run's breakdown should say beside its numbers. Pure: samples in their order in.

``first_sample_outlier``: the first sample is far slower than any other of its run, which
none of them repeats. A cache is the usual reason: a prefix cache skips a prompt it has seen,
so only sample 0 of a run that sends one body again and again pays its prefill (llama.cpp:
a 1,200-token prompt's 0.85 s in sample 0, then 30 ms samples), and the run's median says
nothing of prefill. ``{{nonce}}`` at the start of the prompt (app.probe.template) makes every
prompt new. A first sample's new connection is left out: that is ``connect``'s, not a cache.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.probe.sample import Status

if TYPE_CHECKING:  # summary imports this module; the protocol is only a type here
    from app.analysis.summary import Timed

# The first sample, after connecting, at least this many times the slowest other one and
# this many times their median … (on a busy machine one request of a run can take twice
# another's with no cache involved: llama.cpp with its cores oversubscribed, bench.real_servers)
OUTLIER_RATIO = 2.0
OUTLIER_MEDIAN_RATIO = 3.0
# … and at least this much slower (ms), so that a fast endpoint's jitter says nothing.
OUTLIER_MS = 10.0
MIN_OTHERS = 4


@dataclass(frozen=True, slots=True)
class Note:
    kind: str
    text: str

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "text": self.text}


def run_notes(samples: Sequence[Timed]) -> tuple[Note, ...]:
    note = first_sample_outlier(samples)
    return () if note is None else (note,)


def first_sample_outlier(samples: Sequence[Timed]) -> Note | None:
    answered = [s for s in samples if s.status == Status.OK]
    if len(answered) <= MIN_OTHERS or samples[0] is not answered[0]:
        return None
    first, *others = (_after_connect(s) for s in answered)
    slowest = max(others)
    if first < OUTLIER_RATIO * slowest or first < OUTLIER_MEDIAN_RATIO * statistics.median(others):
        return None
    if first - slowest < OUTLIER_MS:
        return None
    phase = _excess_phase(answered[0], answered[1:])
    text = (
        f"sample 0 took {first:.0f} ms after connecting, {first / max(slowest, 1e-9):.1f}x the"
        f" slowest of the other {len(others)} ({slowest:.0f} ms), the excess in {phase}:"
        " a cache at work? A prefix cache skips a prompt it has seen; {{nonce}} at the"
        " start of the prompt measures prefill on every sample"
    )
    return Note("first_sample_outlier", text)


def _after_connect(sample: Timed) -> float:
    return sample.total_ms - sample.phases.get("connect", 0.0)


def _excess_phase(first: Timed, others: Sequence[Timed]) -> str:
    def excess(name: str) -> float:
        return first.phases[name] - statistics.median(s.phases.get(name, 0.0) for s in others)

    names = [name for name in first.phases if name != "connect"]
    return max(names, key=excess, default="no phase")
