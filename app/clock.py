"""The one clock module: marks in monotonic nanoseconds, "now" as an aware UTC datetime.

Production reads the machine's clocks. ``phasewatch demo`` runs the probe and its
dashboard on a virtual clock (``app.demo.virtual``) and sets both for its thread with
``use``; context variables keep that from leaking into any other thread or task.
``wall`` is the machine's clock whatever the context says (APScheduler's, and the demo's
anchor to real time); everything else asks ``utcnow``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime


def wall() -> datetime:
    """The machine's UTC wall clock, never a virtual one."""
    return datetime.now(UTC)


_monotonic_ns: ContextVar[Callable[[], int]] = ContextVar(
    "probe_monotonic_ns", default=time.perf_counter_ns
)
_wall: ContextVar[Callable[[], datetime]] = ContextVar("probe_wall", default=wall)


def now_ns() -> int:
    """Monotonic nanoseconds: where marks are taken."""
    return _monotonic_ns.get()()


def monotonic() -> float:
    """Monotonic seconds on the same clock as ``now_ns``."""
    return now_ns() / 1e9


def utcnow() -> datetime:
    """Now: the wall clock, or the one ``use`` set for this context (a sample's stamp, the
    service's and the dashboard's "now")."""
    return _wall.get()()


@contextmanager
def use(monotonic_ns: Callable[[], int], wall: Callable[[], datetime]) -> Iterator[None]:
    """Both clocks replaced for the current context (and tasks created in it)."""
    mono_token, wall_token = _monotonic_ns.set(monotonic_ns), _wall.set(wall)
    try:
        yield
    finally:
        _wall.reset(wall_token)
        _monotonic_ns.reset(mono_token)


def parse_timestamp(text: str) -> datetime:
    """An ISO-8601 time with an offset (``Z`` included), as UTC; ValueError otherwise."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO-8601 time") from None
    if value.tzinfo is None:
        raise ValueError(f"{text!r} has no UTC offset (add 'Z' for UTC)")
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{text!r} is out of range in UTC") from None
