"""bench/fleet_replicas.py's accounting (pure: plain values in, a report out).

Every slot due on each target's grid (``app.runs.slots.Grid``) from the moment the replicas
shared the fleet until a margin before the end is given to the replica that owned it
(``app.replicas.assign.owner`` over the replicas live then: all of them before the kill, the
survivors after), and compared with the slots stored. A victim's target's slots between its
last run before the kill and its first after are the kill's gap (counted apart, against the
bound ⌈lease / interval⌉ + 1); the rest missing are the owner's.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from app.replicas.assign import owner
from app.runs.slots import Grid
from bench.common import pct, print_table


@dataclass(frozen=True)
class Run:
    target: str
    slot: int  # ms since the epoch
    late_ms: float  # its start minus its due time


@dataclass
class Replica:
    id: str
    label: str
    targets: int  # owned while all were live
    cpu_s: float  # in the measured window (the victim: until its kill)
    skipped: int  # due runs its log says it skipped
    doubled: float  # runs turned away at ingest, their slot taken
    rss_mb: list[float]  # readings, in time order
    killed: bool = False


@dataclass
class Tally:
    due: int = 0
    stored: int = 0
    missing: int = 0
    runs_in_window: int = 0
    late_ms: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class Plan:
    names: Sequence[str]
    vantage: str
    interval_s: float
    lease_s: float
    ready_ms: int  # every serve answering /healthz from here (the start's slots)
    shared_ms: int  # every replica sharing from here
    window_ms: tuple[int, int]  # the CPU window
    until_ms: int  # slots due after this may still be in flight
    killed_ms: int | None
    victim: str | None


def owner_at(plan: Plan, ids: Sequence[str], target: str, slot: int) -> str | None:
    if plan.killed_ms is None or slot < plan.killed_ms:
        return owner(target, ids)
    return owner(target, [i for i in ids if i != plan.victim])


def due_slots(
    plan: Plan, target: str, since_ms: int | None = None, until_ms: int | None = None
) -> list[int]:
    grid = Grid.of(target, plan.vantage, plan.interval_s)
    since = plan.shared_ms if since_ms is None else since_ms
    first = since - (since - grid.offset_ms) % grid.interval_ms
    first += grid.interval_ms if first < since else 0
    return list(range(first, plan.until_ms if until_ms is None else until_ms, grid.interval_ms))


def start(plan: Plan, runs: Sequence[Run]) -> str:
    """The fleet's start, every replica together: from every serve answering until one
    interval after all shared (one replica owns everything while the others settle)."""
    until = plan.shared_ms + round(plan.interval_s * 1000)
    stored = {(r.target, r.slot): r for r in runs}
    due = [(t, s) for t in plan.names for s in due_slots(plan, t, plan.ready_ms, until)]
    late = [stored[key].late_ms for key in due if key in stored]
    held = (
        f"late p50 / p99 / max {pct(late, 50):.0f} / {pct(late, 99):.0f} / {max(late):.0f} ms"
        if late
        else ""
    )
    return f"start: slots due {len(due):,}, stored {len(late):,}; {held}"


@dataclass
class Gaps:
    """The victim's targets' slots lost around the kill, each target's in slots: before
    it (runs the victim had not stored: in flight, queued, spooled) and after it (until
    the survivors took over)."""

    before: list[int] = field(default_factory=list)
    after: list[int] = field(default_factory=list)


def gap(plan: Plan, dues: list[int], stored: set[int]) -> set[int]:
    """A victim's target's slots lost around the kill: after its last stored before the
    kill, before its first stored after (all after the kill if none was stored after)."""
    assert plan.killed_ms is not None
    before = [s for s in dues if s < plan.killed_ms and s in stored]
    after = [s for s in dues if s >= plan.killed_ms and s in stored]
    low = before[-1] if before else plan.killed_ms
    high = after[0] if after else plan.until_ms
    return {s for s in dues if low < s < high and s not in stored}


def tally(plan: Plan, ids: Sequence[str], runs: Sequence[Run]) -> tuple[dict[str, Tally], Gaps]:
    """Each replica's slots and runs, and each victim's target's gap (in slots)."""
    stored: dict[str, dict[int, Run]] = defaultdict(dict)
    for run in runs:
        stored[run.target][run.slot] = run
    out = {i: Tally() for i in ids}
    gaps = Gaps()
    for target in plan.names:
        dues = due_slots(plan, target)
        mine = stored[target]
        lost = set()
        if plan.victim is not None and owner(target, ids) == plan.victim:
            lost = gap(plan, dues, set(mine))
            assert plan.killed_ms is not None
            gaps.before.append(sum(s < plan.killed_ms for s in lost))
            gaps.after.append(sum(s >= plan.killed_ms for s in lost))
        for slot in dues:
            held = owner_at(plan, ids, target, slot)
            if held is None:
                continue
            t = out[held]
            t.due += 1
            run = mine.get(slot)
            if run is None:
                t.missing += slot not in lost
                continue
            t.stored += 1
            if plan.window_ms[0] <= slot < plan.window_ms[1]:
                t.runs_in_window += 1
                t.late_ms.append(run.late_ms)
    return out, gaps


def bound(plan: Plan) -> int:
    return math.ceil(plan.lease_s / plan.interval_s) + 1


def report(plan: Plan, replicas: Sequence[Replica], runs: Sequence[Run]) -> None:
    ids = [r.id for r in replicas]
    tallies, gaps = tally(plan, ids, runs)
    rows = []
    for r in replicas:
        t = tallies[r.id]
        late = f"{pct(t.late_ms, 50):.0f} / {pct(t.late_ms, 99):.0f}" if t.late_ms else "-"
        per_run = r.cpu_s * 1000 / t.runs_in_window if t.runs_in_window else float("nan")
        rss = " → ".join(f"{mb:.0f}" for mb in _spread(r.rss_mb))
        rows.append([
            r.label + (" (killed)" if r.killed else ""), f"{r.targets:,}",
            f"{per_run:.1f} ({t.runs_in_window:,} runs)", rss, f"{t.due:,}", f"{t.stored:,}",
            str(r.skipped), f"{r.doubled:g}", f"{t.missing:,}", late,
        ])  # fmt: skip
    headers = ["replica", "targets", "CPU ms a run (runs)", "RSS MB over time", "slots due"]
    headers += ["stored", "skipped (log)", "doubled", "missing", "late p50/p99 ms"]
    print_table(headers, rows)
    every = [x for t in tallies.values() for x in t.late_ms]
    cpu = sum(r.cpu_s for r in replicas)
    runs_n = sum(t.runs_in_window for t in tallies.values())
    print(
        f"\nall: slots due {sum(t.due for t in tallies.values()):,}, stored "
        f"{sum(t.stored for t in tallies.values()):,}, skipped "
        f"{sum(r.skipped for r in replicas)}, doubled {sum(r.doubled for r in replicas):g}, "
        f"missing {sum(t.missing for t in tallies.values()):,} (besides the kill's gap); "
        f"CPU a run {cpu * 1000 / max(runs_n, 1):.1f} ms ({runs_n:,} runs in the window)"
    )
    if every:
        print(f"lateness p50 / p99: {pct(every, 50):.0f} / {pct(every, 99):.0f} ms")
    print(start(plan, runs))
    if gaps.before:
        whole = [b + a for b, a in zip(gaps.before, gaps.after, strict=True)]
        after = math.ceil(plan.lease_s / plan.interval_s)
        print(
            f"the victim's {len(whole)} targets: slots lost around the kill, a target: max "
            f"{max(whole)}, total {sum(whole)}, over the bound ({bound(plan)}) "
            f"{sum(w > bound(plan) for w in whole)}; before the kill (not stored by it) max "
            f"{max(gaps.before)}, total {sum(gaps.before)}; after it (until taken over) max "
            f"{max(gaps.after)}, total {sum(gaps.after)}, over ⌈lease / interval⌉ ({after}) "
            f"{sum(a > after for a in gaps.after)}"
        )


def _spread(values: list[float], points: int = 5) -> list[float]:
    """At most ``points`` readings, evenly through the list (first and last kept)."""
    if len(values) <= points:
        return values
    step = (len(values) - 1) / (points - 1)
    return [values[round(k * step)] for k in range(points)]
