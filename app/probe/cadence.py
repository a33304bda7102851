"""The rhythm of a streamed answer, kept bounded: every arrival of tokens is stamped, but
only a summary of the gaps between them is kept (docs/metrics.md).

An *arrival* is one read of the body that carried tokens: every answer or reasoning event
decoded from it counts one token (the kinds tell them apart without a tokenizer). Events
that arrive in one read share its stamp, so a read of ``n`` tokens after a gap ``g`` gives
``n`` inter-token latencies of ``g / n`` (LLMPerf PR #99: a multi-token chunk's gap is its
tokens', not its first token's), while the *stall* is the whole gap ``g``.

The per-token gaps go into a log-linear histogram (32 buckets an octave of nanoseconds,
2,080 counts, 16 KB): its quantiles are within 1.6 % of the exact ones, the maxima are
exact. While the stream lasts the arrivals wait in a buffer of at most ``FOLD_EVERY``
stamps (8 KB) between folds; what a sample keeps after it is ``StreamStats``' dozen numbers.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

_MANTISSA_BITS = 5  # 32 buckets an octave: a bucket's midpoint is within 1/64 of its values
_SUB = 1 << _MANTISSA_BITS
QUANTILES = {"p50": 50, "p90": 90}  # percent, whole: the rank is exact integer work
FOLD_EVERY = 1024  # arrivals buffered (8 KB) before they are folded into the summary
_KEYS = (64 << _MANTISSA_BITS) + _SUB  # every bucket key of a 64-bit gap is below it


@dataclass(frozen=True, slots=True)
class StreamStats:
    """What a sample keeps of its stream's rhythm (``details["stream"]``); milliseconds
    from the request's start for the ``_at`` offsets."""

    answer_tokens: int  # answer events (text, tool-call output) seen
    reasoning_tokens: int  # reasoning events (reasoning_content, thinking blocks) seen
    arrivals: int  # reads of the body that carried at least one token
    itl_ms: dict[str, float]  # per-token gaps after the first token: p50, p90, max
    stall_ms: float  # the longest gap between two arrivals (or from the last to a cut)
    stall_at_ms: float | None  # when the stall ended: the arrival after it, or the cut
    stall_token: int | None  # tokens that had arrived before the stall
    stall_open: bool = False  # the stream was cut during its longest stall

    @property
    def tokens(self) -> int:
        return self.answer_tokens + self.reasoning_tokens

    def to_json(self) -> dict[str, Any]:
        return {
            "answer_tokens": self.answer_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "arrivals": self.arrivals,
            "itl_ms": {k: round(v, 4) for k, v in self.itl_ms.items()},
            "stall_ms": round(self.stall_ms, 4),
            "stall_at_ms": None if self.stall_at_ms is None else round(self.stall_at_ms, 4),
            "stall_token": self.stall_token,
            "stall_open": self.stall_open,
        }


class Cadence:
    """Stamps a stream's arrivals of tokens, then sums them up (``stats``).

    An arrival costs one C-level append to ``stamps`` (the stream reader's fast path does
    it itself); every ``FOLD_EVERY`` arrivals, and at the end, the buffer is folded into the
    running summary with numpy. So the per-chunk work inside the measured request is an
    append and a length check, and the memory a bounded buffer plus the histogram.
    """

    __slots__ = (
        "stamps",
        "several",
        "reasoning",
        "tokens",
        "arrivals",
        "last",
        "max_gap",
        "max_itl",
        "stall_at",
        "stall_token",
        "histogram",  # last: ``_state`` compares it apart
    )

    def __init__(self) -> None:
        self.stamps = array("q")  # arrivals not yet folded, ns
        self.several: dict[int, int] = {}  # position in ``stamps`` → its tokens, when not 1
        self.reasoning = 0  # reasoning tokens (the rest are answer tokens)
        self.tokens = 0  # tokens of the folded arrivals
        self.arrivals = 0  # folded arrivals
        self.last: int | None = None  # the last folded arrival
        # Tokens whose gap fell in each bucket (by key), from the first gap on.
        self.histogram: NDArray[np.float64] | None = None
        self.max_gap = 0  # ns, between two arrivals
        self.max_itl = 0  # ns, the largest per-token gap
        self.stall_at: int | None = None
        self.stall_token: int | None = None

    def __eq__(self, other: object) -> bool:
        # The same stamps give the same state: a reader's shortcut must not change it.
        if not isinstance(other, Cadence):
            return NotImplemented
        return self._state() == other._state()

    __hash__ = None  # type: ignore[assignment]  # mutable

    def _state(self) -> tuple[object, ...]:
        histogram = None if self.histogram is None else self.histogram.tobytes()
        return (*(getattr(self, name) for name in self.__slots__[:-1]), histogram)

    def arrive(self, now_ns: int, answer: int, reasoning: int) -> None:
        """A read at ``now_ns`` carried ``answer`` + ``reasoning`` (≥ 1) tokens."""
        stamps = self.stamps
        if answer + reasoning != 1:
            self.several[len(stamps)] = answer + reasoning
        self.reasoning += reasoning
        stamps.append(now_ns)
        if len(stamps) >= FOLD_EVERY:
            self.fold()

    def fold(self) -> None:
        """The buffered arrivals into the summary; the buffer emptied in place (the reader
        holds it)."""
        count = len(self.stamps)
        if not count:
            return
        times = np.array(self.stamps, dtype=np.int64)
        tokens = None  # one each, unless some read brought several
        if self.several:
            tokens = np.ones(count, dtype=np.int64)
            tokens[list(self.several)] = list(self.several.values())
        if self.last is None:
            self._add_gaps(np.diff(times), times, tokens, 1)
        else:
            self._add_gaps(np.diff(times, prepend=self.last), times, tokens, 0)
        self.tokens += count if tokens is None else int(tokens.sum())
        self.arrivals += count
        self.last = int(times[-1])
        del self.stamps[:]
        self.several.clear()

    def _add_gaps(
        self,
        gaps: NDArray[np.int64],
        times: NDArray[np.int64],
        tokens: NDArray[np.int64] | None,
        offset: int,
    ) -> None:
        """``gaps[i]`` ends at ``times[i + offset]``, which brought ``tokens[i + offset]``."""
        if not gaps.size:
            return
        longest = int(gaps.argmax())  # the first of equal gaps, as a stream would see it
        if gaps[longest] > self.max_gap:
            end = longest + offset
            self.max_gap, self.stall_at = int(gaps[longest]), int(times[end])
            self.stall_token = self.tokens + (end if tokens is None else int(tokens[:end].sum()))
        after = None if tokens is None else tokens[offset:]
        per = gaps if after is None else gaps // after
        self.max_itl = max(self.max_itl, int(per.max()))
        counts = np.bincount(buckets(per), weights=after, minlength=_KEYS)
        if self.histogram is None:
            self.histogram = np.zeros(_KEYS, dtype=np.float64)
        self.histogram += counts

    def stats(self, cut_ns: int | None = None) -> StreamStats | None:
        """The summary, or None when no token arrived. ``cut_ns``: the stream was cut then,
        so the time since its last arrival is a stall still going on."""
        self.fold()
        if self.last is None:
            return None
        gap, at, token, still = self.max_gap, self.stall_at, self.stall_token, False
        if cut_ns is not None and cut_ns - self.last > gap:
            gap, at, token, still = cut_ns - self.last, cut_ns, self.tokens, True
        return StreamStats(
            answer_tokens=self.tokens - self.reasoning,
            reasoning_tokens=self.reasoning,
            arrivals=self.arrivals,
            itl_ms=self._itl_ms(),
            stall_ms=gap / 1e6,
            stall_at_ms=None if at is None else at / 1e6,
            stall_token=token,
            stall_open=still,
        )

    def _itl_ms(self) -> dict[str, float]:
        if self.histogram is None:
            return {}
        found = {name: min(value, self.max_itl) for name, value in self._quantiles().items()}
        return {**{k: v / 1e6 for k, v in found.items()}, "max": self.max_itl / 1e6}

    def _quantiles(self) -> dict[str, float]:
        """Nearest rank: the smallest bucket holding the ``⌈q·n⌉``-th token gap."""
        assert self.histogram is not None
        running = np.cumsum(self.histogram)
        total = int(running[-1])
        found: dict[str, float] = {}
        for name, percent in QUANTILES.items():
            rank = max(1, -(-percent * total // 100))
            found[name] = _midpoint(int(np.searchsorted(running, rank)))
        return found


def buckets(ns: NDArray[np.int64]) -> NDArray[np.int64]:
    """``bucket`` of every gap at once (``frexp``'s exponent is the bit length of an int
    below 2**53: any gap shorter than a hundred days)."""
    bits = np.frexp(ns.astype(np.float64))[1].astype(np.int64)
    shift = np.maximum(bits - _MANTISSA_BITS - 1, 0)
    above = (bits << _MANTISSA_BITS) | ((ns >> shift) & (_SUB - 1))
    return np.where(bits > _MANTISSA_BITS, above, ns)


def bucket(ns: int) -> int:
    """Gaps below 32 ns are their own bucket; above, the octave and the next 5 bits."""
    bits = ns.bit_length()
    if bits <= _MANTISSA_BITS:
        return ns
    return (bits << _MANTISSA_BITS) | ((ns >> (bits - _MANTISSA_BITS - 1)) & (_SUB - 1))


def _midpoint(key: int) -> float:
    if key < _SUB:
        return float(key)
    bits, mantissa = key >> _MANTISSA_BITS, key & (_SUB - 1)
    width = 1 << (bits - _MANTISSA_BITS - 1)
    return float(((_SUB | mantissa) * width) + width / 2)
