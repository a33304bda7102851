"""The simulated endpoint in a process of its own, and ``SimProcess``, the handle to it.

A sim served from a thread of the probe's own process shares the probe's interpreter lock:
whenever one of the two runs Python, the other waits for it, up to the 5 ms switch
interval, and that wait lands in whatever phase was being timed. A real endpoint never
sits in its client's process, so accuracy tests and benchmarks serve the sim from here.

``python -m app.demo.sim.process --config '{"one_way_ms": 50}'`` serves ``SimApp`` with
hypercorn on an ephemeral loopback port and prints its URL as the first line of stdout. It
then answers one-line commands on stdin, each with one JSON line on stdout:

* ``truths``: every logged ``Truth`` so far, as a list of objects, in order of completion
* ``reconfigure {"queue_median_ms": 50}``: change the config (``SimApp.reconfigure``)
* ``lag``: how late this process's event loop woke from 5 ms sleeps (p50, p99, max ms)
* ``quit``: stop

It also stops on stdin's end (its parent has gone) and after ``--max-seconds``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import select
import subprocess
import sys
from types import TracebackType
from typing import Any, Self

from app.demo.sim.app import SimConfig, Truth
from app.demo.sim.server import SimServer, run_precise

_LAG_INTERVAL_S = 0.005
_START_TIMEOUT_S = 15.0
_REPLY_TIMEOUT_S = 10.0
_STOP_TIMEOUT_S = 5.0


class SimProcess:
    """``python -m app.demo.sim.process`` as a child; a context manager: waits until it listens."""

    def __init__(
        self,
        config: SimConfig,
        *,
        certfile: str | None = None,
        keyfile: str | None = None,
        http2: bool = True,
        max_seconds: float = 600.0,
    ) -> None:
        self.command = [sys.executable, "-m", "app.demo.sim.process"]
        self.command += ["--config", json.dumps(dataclasses.asdict(config))]
        self.command += ["--max-seconds", str(max_seconds)]
        if certfile is not None and keyfile is not None:
            self.command += ["--certfile", certfile, "--keyfile", keyfile]
        if not http2:
            self.command.append("--no-http2")
        self._process: subprocess.Popen[bytes] | None = None
        self.url = ""

    def __enter__(self) -> SimProcess:
        self._process = subprocess.Popen(
            self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        try:
            self.url = self._read_reply(_START_TIMEOUT_S)
        except BaseException:
            self._stop()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop()

    def truths(self) -> list[Truth]:
        """Every truth the sim logged so far, in order of completion."""
        rows = self._ask("truths")
        return [Truth(**row) for row in rows]

    def reconfigure(self, **changes: Any) -> None:
        reply = self._ask(f"reconfigure {json.dumps(changes)}")
        if reply is not True:
            raise ValueError(f"the sim refused {changes}: {reply['error']}")

    def loop_lag(self) -> dict[str, float]:
        """How late the sim's event loop woke from 5 ms sleeps (ms), since it started."""
        reply: dict[str, float] = self._ask("lag")
        return reply

    def _stop(self) -> None:
        process = self._running()
        try:
            self._send("quit")
            assert process.stdin is not None
            process.stdin.close()
            process.wait(_STOP_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired):
            process.terminate()  # our own child, by its handle
            process.wait(_STOP_TIMEOUT_S)
        finally:
            assert process.stdout is not None
            process.stdout.close()

    def _running(self) -> subprocess.Popen[bytes]:
        if self._process is None:
            raise RuntimeError("the sim process has not been started")
        return self._process

    def _ask(self, command: str) -> Any:
        self._send(command)
        return self._read_reply(_REPLY_TIMEOUT_S)

    def _send(self, command: str) -> None:
        stdin = self._running().stdin
        assert stdin is not None
        stdin.write(command.encode() + b"\n")
        stdin.flush()

    def _read_reply(self, timeout_s: float) -> Any:
        stdout = self._running().stdout
        assert stdout is not None
        ready, _, _ = select.select([stdout], [], [], timeout_s)
        line = stdout.readline() if ready else b""
        if not line:
            raise RuntimeError("the sim process did not answer (see its stderr above)")
        return json.loads(line)


# --- the child ---------------------------------------------------------------------------


class LoopLag:
    """How late this process's event loop wakes from short sleeps, while the block runs:
    contention made visible. The benchmarks measure their own loop with it too."""

    def __init__(self, interval_s: float = _LAG_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self.lags_ms: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Self:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._task is not None
        self._task.cancel()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + self.interval_s
            await asyncio.sleep(self.interval_s)
            self.lags_ms.append((loop.time() - due) * 1000)

    def percentiles(self) -> dict[str, float]:
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


def _answer(sim: SimServer, lag: LoopLag, command: str, argument: str) -> Any:
    if command == "truths":
        return [dataclasses.asdict(t) for t in sim.truths()]
    if command == "lag":
        return lag.percentiles()
    if command == "reconfigure":
        try:
            sim.reconfigure(**json.loads(argument))
        except (ValueError, TypeError) as error:
            return {"error": str(error)}
        return True
    return {"error": f"unknown command: {command}"}


async def _commands(sim: SimServer, lag: LoopLag) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := (await reader.readline()).decode().strip():
        command, _, argument = line.partition(" ")
        if command == "quit":
            return
        _reply(_answer(sim, lag, command, argument))


async def _serve(args: argparse.Namespace) -> None:
    config = SimConfig(**json.loads(args.config))
    server = SimServer(
        config, certfile=args.certfile, keyfile=args.keyfile, http2=not args.no_http2
    )
    async with server as sim, LoopLag() as lag:
        _reply(sim.url)
        try:
            await asyncio.wait_for(_commands(sim, lag), args.max_seconds)
        except TimeoutError:
            sys.stderr.write("simproc: --max-seconds reached, stopping\n")


def main(argv: list[str] | None = None) -> None:
    run_precise(_serve(_arguments(argv)))


if __name__ == "__main__":
    main()
