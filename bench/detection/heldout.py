"""Two kinds nobody tunes on: the detectors' authors are not told of them, and ``run``
reports them apart ("untuned kinds"), so they say how the detectors do on what they were
not shaped for.

* ``retrieval_prompts``: retrieval is added to a chat service's prompts; prefill grows
  six-fold and takes the lead from generation at both vantages. A real change of the mix.
* ``weekly_batch_window``: every Wednesday 01:00-04:00 UTC a batch job shares the
  cluster; the queue triples and its tail thickens for those three hours. A pattern that
  recurs, not a change: no event.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from bench.detection.model import MICROS
from bench.detection.scenario import ABRUPT, CHAT, DAY, SLOWER, Context, after, hours

SHORT_ANSWERS = replace(
    CHAT,
    rtt_ms={"seoul-1": 60.0, "frankfurt-1": 150.0},
    server_ms={"queue": 110.0, "prefill": 45.0, "generation": 210.0, "transfer": 3.0},
)
PREFILL_GROWTH = 6.0
BATCH = (2, 1.0, 3.0)  # weekday (Monday 0), first hour (UTC), hours
BATCH_QUEUE = 3.0
BATCH_TAIL_P = 0.06


def retrieval_prompts(ctx: Context) -> None:
    for n in range(ctx.params.replicas):
        at = ctx.at_fraction(0.4, 0.6)
        series = ctx.target(f"k{n}", ctx.jittered(SHORT_ANSWERS), "prompts get retrieval")
        for s in series:
            later = after(s, at)
            s.medians[later, s.column("prefill")] *= PREFILL_GROWTH
        ctx.event(
            id=f"retrieval-k{n}",
            kind="dominant_shift",
            target=series[0].target,
            vantage=None,
            start=at,
            window=(at, at + DAY),
            abrupt=True,
            accept=("dominant_shift",),
            tolerate=(*ABRUPT, *SLOWER),  # slower too: a level shift is true
            note=f"prefill × {PREFILL_GROWTH:g}: generation → prefill",
        )


def weekly_batch_window(ctx: Context) -> None:
    weekday, first, length = BATCH
    profiles = (CHAT, replace(CHAT, server_ms={**CHAT.server_ms, "queue": 260.0}))
    for n in range(ctx.params.replicas):
        profile = ctx.jittered(profiles[n % len(profiles)])
        for s in ctx.target(f"w{n}", profile, "a weekly batch job shares the cluster"):
            days = (s.starts // (86400 * MICROS)).astype(np.int64)
            inside = ((days + 3) % 7 == weekday) & ((hours(s) - first) % 24 < length)
            s.medians[inside, s.column("queue")] *= BATCH_QUEUE
            s.tail_scale_ms[inside] *= BATCH_QUEUE
            s.tail_p[inside] = BATCH_TAIL_P
