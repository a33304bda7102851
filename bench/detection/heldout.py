"""Two kinds nobody tunes on: the detectors' authors are not told of them, and ``run``
reports them apart ("untuned kinds"), so they say how the detectors do on what they were
not shaped for.

* ``retrieval_prompts``: retrieval is added to a chat service's prompts; prefill grows
  six-fold and takes the lead from generation at both vantages. A real change of the mix.
* ``replica_affinity``: the service runs on two backends, one older and 30 % slower in
  prefill and generation; sticky sessions keep a vantage's runs on one for hours at a
  time. Stationary from the first run: no event, though end-to-end moves by 15-20 % for
  hours.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from bench.detection.model import MICROS
from bench.detection.scenario import ABRUPT, CHAT, DAY, REASONING, SLOWER, Context, after

SHORT_ANSWERS = replace(
    CHAT,
    rtt_ms={"seoul-1": 60.0, "frankfurt-1": 150.0},
    server_ms={"queue": 110.0, "prefill": 45.0, "generation": 210.0, "transfer": 3.0},
)
PREFILL_GROWTH = 6.0
OLD_BACKEND = 1.3  # the older backend's prefill and generation × this
STAY = 0.95  # per run: a session stays on its backend (stretches of 5 h on average)


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


def replica_affinity(ctx: Context) -> None:
    """Each run lands on one of two backends and stays there a while (session affinity):
    the older one is ``OLD_BACKEND`` × slower in prefill and generation. Stationary from
    the first run, so nothing changes, but stretches of hours run 15-20 % slower."""
    profiles = (CHAT, REASONING)
    for n in range(ctx.params.replicas):
        profile = ctx.jittered(profiles[n % len(profiles)])
        for s in ctx.target(f"a{n}", profile, "two backends, sticky sessions"):
            old = _sticky(ctx, ctx.slots)  # each vantage's client has its own session
            slots = (s.starts - s.starts[0]) // int(ctx.params.interval_s * MICROS)
            on_old = old[np.minimum(slots, ctx.slots - 1)]
            for phase in ("prefill", "generation"):
                s.medians[on_old, s.column(phase)] *= OLD_BACKEND


def _sticky(ctx: Context, slots: int) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """Per run slot: on the old backend? A two-state chain that stays with ``STAY``."""
    switch = ctx.rng.random(slots) > STAY
    state = bool(ctx.rng.random() < 0.5)
    out = np.empty(slots, dtype=bool)
    for i in range(slots):
        state ^= bool(switch[i])
        out[i] = state
    return out
