"""Digests summarized together give each the summary it has alone: the same quantiles,
shares and dominant phase, whatever the others hold and however many there are."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from app.analysis.digest import SUMMARIES_AT_ONCE, Digest, digest_of, summaries
from app.store.records import SampleRecord

T0 = datetime(2026, 12, 7, tzinfo=UTC)


def digest(seed: int, n: int, phases: tuple[str, ...], scale: float = 1.0) -> Digest:
    rng = random.Random(seed)
    samples = []
    for k in range(n):
        times = {name: rng.lognormvariate(0, 1) * scale for name in phases}
        status = "ok" if k % 7 else "deadline_exceeded"
        samples.append(SampleRecord(k, T0, status, sum(times.values()) or 1.0, times))
    samples.append(SampleRecord(n, T0, "error", 2.0, {}, error_class="ConnectError"))
    return digest_of(samples)


CASES = {
    "one": [digest(1, 20, ("connect", "server"))],
    "empty and failed only": [Digest(), digest(2, 0, ()), digest(3, 5, ("server",))],
    "far apart ranges": [
        digest(4, 20, ("connect",), 0.001),
        digest(5, 20, ("server", "transfer"), 60_000.0),
        digest(6, 1, ("queue", "prefill", "generation")),
    ],
    "phases differing": [digest(7 + k, 10, ("connect", "server")[: 1 + k % 2]) for k in range(6)],
    "more than one pass": [
        digest(20 + k, 5 + k % 9, ("network", "server", "transfer")[: 1 + k % 3], 1.0 + k)
        for k in range(2 * SUMMARIES_AT_ONCE + 3)
    ],
    "none": [],
}


@pytest.mark.parametrize("digests", CASES.values(), ids=CASES.keys())
def test_digests_summarized_together_give_each_its_own_summary(digests: list[Digest]) -> None:
    assert summaries(digests) == [summaries([d])[0] for d in digests]
    assert summaries(digests) == [d.summary() for d in digests]
