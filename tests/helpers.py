"""What many test modules share: waiting for a condition, a free port, this process's lag,
a virtual-clock loop, a /metrics text read by sample.

``eventually`` is the one way a test waits for something another thread or process does. Its
timeout is a liveness bound (generous: how long before we call it stuck), never a claim
about speed; a speed claim belongs in bench/.
"""

from __future__ import annotations

import asyncio
import socket
import statistics
import threading
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Self, TypeVar

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from app.demo.sim.app import SimConfig
from app.demo.virtual import VirtualClock, VirtualEventLoop

T = TypeVar("T")

POLL_S = 0.05
# The simulated endpoint for tests that need an answer, not a measurement: a few
# milliseconds a request.
FAST_SIM = SimConfig(one_way_ms=1, queue_median_ms=2, queue_sigma=0, prefill_ms=1, tokens=3)


def eventually(check: Callable[[], T], within_s: float = 30.0, what: str = "") -> T:
    """Poll ``check()`` until it returns something truthy, and return that.

    Fails after ``within_s``: the thing never happened (a liveness bound, not a speed claim).
    """
    deadline = time.monotonic() + within_s
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within_s} s: {what or check}")
        time.sleep(POLL_S)


async def until(check: Callable[[], object], within_s: float = 30.0, what: str = "") -> None:
    """``eventually`` on an event loop: it yields between looks, so the loop runs on. The timeout
    is a liveness bound (the thing never happened), not a speed claim."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"not within {within_s} s: {what or check}")
        await asyncio.sleep(0.01)


def parsed(text: str) -> dict[str, list[Sample]]:
    """A /metrics text's samples by name (a counter's ``…_total``, a histogram's buckets)."""
    by_name: dict[str, list[Sample]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            by_name.setdefault(sample.name, []).append(sample)
    return by_name


def value(found: dict[str, list[Sample]], name: str, **labels: str) -> float | None:
    """The one sample of ``name`` with exactly ``labels``; None if there is none."""
    hits = [s.value for s in found.get(name, []) if s.labels == labels]
    assert len(hits) <= 1
    return hits[0] if hits else None


def free_port() -> int:
    """A loopback port nobody listens on just now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ThreadLag:
    """How late a thread of this process wakes from 5 ms sleeps, while the block runs.

    The in-process simulator's loop competes for the same CPUs and interpreter lock as this
    thread, so its sleeps end late by about as much. A bound on a simulated delay is then
    "nominal + slack + the worst lag seen meanwhile": exact on a quiet machine, still true on
    a loaded one.
    """

    def __init__(self, interval_s: float = 0.005) -> None:
        self.interval_s = interval_s
        self.lags_ms: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lag", daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.is_set():
            due = time.perf_counter() + self.interval_s
            time.sleep(self.interval_s)
            self.lags_ms.append((time.perf_counter() - due) * 1000)

    def worst_ms(self) -> float:
        """The latest wake-up so far (0 before the first)."""
        return max(self.lags_ms, default=0.0)

    def typical_ms(self) -> float:
        """The 90th percentile of the wake-ups so far (0 before the first): what a median
        over several waits can be late by, where the worst bounds a single wait."""
        if not self.lags_ms:
            return 0.0
        return statistics.quantiles(self.lags_ms, n=10, method="inclusive")[-1]


def run_virtual(
    main: Callable[[VirtualEventLoop], Awaitable[Any]], speed: float | None = None
) -> Any:
    """``main(loop)`` run to its end on a new loop whose clock jumps over idle time."""
    loop = VirtualEventLoop(VirtualClock(start=1000.0, speed=speed))
    with asyncio.Runner(loop_factory=lambda: loop) as runner:
        return runner.run(main(loop))
