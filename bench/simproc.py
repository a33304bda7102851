"""The simulated endpoint in a process of its own, so its CPU does not count against a probe.

``python -m bench.simproc --config '{"one_way_ms": 50}'`` serves ``SimApp`` with hypercorn on
an ephemeral loopback port and prints its URL as the first line of stdout. It then answers
one-line commands on stdin, each with one JSON line on stdout:

* ``truths``: every logged ``Truth`` so far, as a list of objects
* ``lag``: how late this process's event loop woke from 5 ms sleeps (p50, p99, max ms)
* ``quit``: stop

It also stops on stdin's end (its parent has gone) and after ``--max-seconds``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import selectors
import sys
from typing import Any

from app.demo.sim import SimConfig
from app.demo.simserver import SimServer

_LAG_INTERVAL_S = 0.005


class LagMonitor:
    """How late the loop wakes from short sleeps: contention made visible."""

    def __init__(self) -> None:
        self.lags_ms: list[float] = []

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + _LAG_INTERVAL_S
            await asyncio.sleep(_LAG_INTERVAL_S)
            self.lags_ms.append((loop.time() - due) * 1000)

    def summary(self) -> dict[str, float]:
        values = sorted(self.lags_ms) or [0.0]
        n = len(values)
        return {
            "n": n,
            "p50": values[n // 2],
            "p99": values[min(n - 1, int(n * 0.99))],
            "max": values[-1],
        }


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", default="{}", help="SimConfig fields as a JSON object")
    parser.add_argument("--certfile")
    parser.add_argument("--keyfile")
    parser.add_argument("--no-http2", action="store_true")
    parser.add_argument("--max-seconds", type=float, default=600.0)
    return parser.parse_args(argv)


def _reply(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload) + "\n")
    sys.stdout.flush()


async def _commands(sim: SimServer, lag: LagMonitor) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := (await reader.readline()).decode().strip():
        if line == "quit":
            return
        if line == "truths":
            _reply([dataclasses.asdict(t) for t in sim.truths()])
        elif line == "lag":
            _reply(lag.summary())
        else:
            _reply({"error": f"unknown command: {line}"})


async def _serve(args: argparse.Namespace) -> None:
    config = SimConfig(**json.loads(args.config))
    server = SimServer(
        config, certfile=args.certfile, keyfile=args.keyfile, http2=not args.no_http2
    )
    async with server as sim:
        lag = LagMonitor()
        monitor = asyncio.create_task(lag.run())
        _reply(sim.url)
        try:
            await asyncio.wait_for(_commands(sim, lag), args.max_seconds)
        except TimeoutError:
            print("simproc: --max-seconds reached, stopping", file=sys.stderr)
        finally:
            monitor.cancel()


def main(argv: list[str] | None = None) -> None:
    args = _arguments(argv)
    # As SimServer does in its own thread: select() sleeps to the microsecond, epoll
    # rounds every timeout up to a whole millisecond.
    factory = lambda: asyncio.SelectorEventLoop(selectors.SelectSelector())  # noqa: E731
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(_serve(args))


if __name__ == "__main__":
    main()
