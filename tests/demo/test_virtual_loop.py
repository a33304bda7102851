"""The demo's virtual-time event loop: timers jump, real sockets and threads still work."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from app import clock
from app.demo.sim.app import SimConfig
from app.demo.sim.server import SimServer
from app.demo.virtual import VirtualEventLoop
from app.probe.run import probe_run
from app.probe.spec import Kind, ProbeSpec
from tests.helpers import run_virtual


@pytest.mark.parametrize(
    ("delays", "expected_order"),
    [
        ((3600.0,), [0]),
        ((5.0, 1.0, 3.0), [1, 2, 0]),
        ((0.001, 86400.0 * 3, 0.002), [0, 2, 1]),  # beyond asyncio's one-day select cap
    ],
)
def test_timers_fire_in_order_at_their_virtual_time_without_waiting(
    delays: tuple[float, ...], expected_order: list[int]
) -> None:
    async def main(loop: VirtualEventLoop) -> list[tuple[int, float]]:
        fired: list[tuple[int, float]] = []
        start = loop.time()

        async def wait(index: int, delay: float) -> None:
            await asyncio.sleep(delay)
            fired.append((index, loop.time() - start))

        await asyncio.gather(*(wait(i, d) for i, d in enumerate(delays)))
        return fired

    real_start = time.monotonic()
    fired = run_virtual(main)
    if max(delays) >= 3600:  # an hour of virtual time, nowhere near an hour of real time
        assert time.monotonic() - real_start < 60
    assert [index for index, _ in fired] == expected_order
    for index, at in fired:
        assert at == pytest.approx(delays[index], abs=1e-9)


def test_real_loopback_io_is_delivered_before_the_clock_moves() -> None:
    """A reply sent after a virtual 0.25 s arrives exactly 0.25 s later, not at the next timer."""

    async def main(loop: VirtualEventLoop) -> list[float]:
        handled = asyncio.Event()

        async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while line := await reader.readline():
                await asyncio.sleep(0.25)
                writer.write(line)
                await writer.drain()
            writer.close()
            await writer.wait_closed()
            handled.set()

        server = await asyncio.start_server(echo, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        # A far timer the loop could jump to if it ever missed an I/O event.
        far = asyncio.create_task(asyncio.sleep(10_000))
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        took = []
        for _ in range(5):
            sent = loop.time()
            writer.write(b"ping\n")
            assert await reader.readline() == b"ping\n"
            took.append(loop.time() - sent)
        writer.close()
        await writer.wait_closed()
        await handled.wait()
        far.cancel()
        server.close()
        await server.wait_closed()
        return took

    assert run_virtual(main) == pytest.approx([0.25] * 5, abs=1e-9)


def test_the_clock_waits_for_worker_threads_so_their_timeouts_never_fire_early() -> None:
    async def main(loop: VirtualEventLoop) -> tuple[str, float, bool]:
        busy = threading.Event()

        def slow() -> str:
            busy.set()
            time.sleep(0.05)  # real work: the virtual clock must not run past it
            return "stored"

        other = asyncio.create_task(asyncio.sleep(3600))  # a timer the loop could jump to
        before = loop.time()
        result = await asyncio.wait_for(asyncio.to_thread(slow), timeout=1.0)
        during = loop.time() - before
        await other
        return result, during, busy.is_set()

    result, during, ran = run_virtual(main)
    assert (result, ran) == ("stored", True)
    assert during == 0.0


def test_speed_caps_how_fast_the_virtual_clock_runs() -> None:
    async def main(loop: VirtualEventLoop) -> float:
        await asyncio.sleep(2.0)
        return loop.time()

    real_start = time.monotonic()
    run_virtual(main, speed=20.0)
    assert time.monotonic() - real_start >= 2.0 / 20.0


def test_sockets_the_loop_watches_get_tcp_nodelay() -> None:
    async def main(loop: VirtualEventLoop) -> int:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # proto 0: asyncio skips it
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        client.setblocking(False)
        await loop.sock_connect(client, listener.getsockname())
        _, writer = await asyncio.open_connection(sock=client)
        value = client.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        writer.close()
        await writer.wait_closed()
        listener.close()
        return value

    assert run_virtual(main) != 0


@pytest.mark.parametrize("reasoning_tokens", [0, 30])
def test_the_production_probe_measures_the_sims_truth_exactly_on_virtual_time(
    reasoning_tokens: int,
) -> None:
    config = SimConfig(
        one_way_ms=137.5,
        queue_median_ms=200.0,
        queue_sigma=0.5,
        prefill_ms=40.0,
        tokens=5,
        tokens_per_s=50.0,
        reasoning_tokens=reasoning_tokens,
        seed=3,
    )
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}

    async def main(loop: VirtualEventLoop) -> tuple[list[Any], list[Any]]:
        with clock.use(loop.clock.now_ns, lambda: datetime.now(UTC)):
            async with SimServer(config, http2=False) as sim:
                url = f"{sim.url}/v1/chat/completions"
                spec = ProbeSpec(url=url, kind=Kind.OPENAI, method="POST", body=body)
                samples = await probe_run(spec, 6)
                return samples, sim.truths()

    samples, truths = run_virtual(main)
    assert [s.status.value for s in samples] == ["ok"] * 6
    assert [s.connection_reused for s in samples] == [False] + [True] * 5
    for sample, truth in zip(samples, truths, strict=True):
        expected = {
            "network": truth.network_ms,
            "queue": truth.queue_ms,
            "prefill": truth.prefill_ms,
            "generation": truth.generation_ms,
        }
        for phase, ms in expected.items():
            assert sample.phases[phase] == pytest.approx(ms, abs=0.01), phase
        assert sample.phases["connect"] == pytest.approx(0.0, abs=0.01)
