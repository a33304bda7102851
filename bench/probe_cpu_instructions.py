"""Instructions per sample: the probe against a bare httpx streaming read, under callgrind.

The load-independent twin of ``probe_cpu``: CPU time on a shared machine moves with
what else runs (caches, frequency, steal), instruction counts do not. Each kind of request
runs in its own process under ``valgrind --tool=callgrind --instr-atstart=no``; the sim
runs outside valgrind, in its own process. A process imports, makes its warm-up requests
uninstrumented, then switches callgrind's instrumentation on for exactly the ``N``
measured requests (callgrind's client requests, from a five-line C helper built with the
system's ``cc`` and ``valgrind/callgrind.h``). Kinds:

* ``bare`` — ``client.stream(...)`` + ``aiter_bytes()`` on a client from ``make_client``
  (the probe's transport, so only the probe's own work differs: the goal's ratio);
* ``httpx`` — the same read on a default ``httpx.AsyncClient`` (httpcore's anyio backend),
  what a user of plain httpx runs;
* ``probe`` — ``probe_once``.

    .venv/bin/python -m bench.probe_cpu_instructions [--samples 30]
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import gc
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from app.demo.sim.process import SimProcess
from app.probe.client import make_client, warm_up
from bench.common import REPO_ROOT, RunClock, chat_spec, print_header, print_table
from bench.probe_cpu import FAST, Request, bare_request, probe_request

KINDS = ("bare", "httpx", "probe")
_WARMUP = 10
_GOAL = 1.2
_RUN_TIMEOUT_S = 1200
_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")
_TOGGLE_C = """
#include <valgrind/callgrind.h>
void start(void) { CALLGRIND_START_INSTRUMENTATION; }
void stop(void) { CALLGRIND_STOP_INSTRUMENTATION; }
"""


def build_toggle(directory: Path) -> Path:
    source, library = directory / "toggle.c", directory / "toggle.so"
    source.write_text(_TOGGLE_C)
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", library, source], check=True)
    return library


async def _child(kind: str, count: int, url: str, toggle: str) -> None:
    callgrind = ctypes.CDLL(toggle)
    spec = chat_spec(url, timeout_s=300.0)  # valgrind runs code 20-50 times slower
    client = httpx.AsyncClient(timeout=10.0) if kind == "httpx" else make_client(spec)
    async with client:
        await warm_up()
        request = probe_request(client, spec) if kind == "probe" else bare_request(client, spec.url)
        for _ in range(_WARMUP):
            await request()
        gc.collect()  # each kind starts its measured requests from a collected heap
        callgrind.start()
        for _ in range(count):
            await _once(request)
        callgrind.stop()


async def _once(request: Request) -> None:
    # Under valgrind the sim may time out a pooled connection (hypercorn: 5 s idle) just
    # as it is reused; such a request is made again, and said so.
    try:
        await request()
    except (httpx.TransportError, RuntimeError) as exc:
        print(f"retried after {exc!r}", file=sys.stderr)
        await request()


def _instructions(kind: str, count: int, url: str, directory: Path) -> int:
    command = ["valgrind", "--tool=callgrind", "--instr-atstart=no"]
    command += [f"--callgrind-out-file={directory / f'callgrind.{kind}'}"]
    command += [sys.executable, "-m", "bench.probe_cpu_instructions"]
    command += ["--child", kind, str(count), url, str(directory / "toggle.so")]
    env = {"PYTHONHASHSEED": "0", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        command, capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=_RUN_TIMEOUT_S
    )
    found = _COLLECTED.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"callgrind run of {kind} failed:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def _per_request(url: str, count: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as name, ThreadPoolExecutor(len(KINDS)) as pool:
        build_toggle(Path(name))
        totals = pool.map(lambda kind: _instructions(kind, count, url, Path(name)), KINDS)
        return {kind: total / count for kind, total in zip(KINDS, totals, strict=True)}


def _report(per_request: dict[str, float]) -> None:
    labels = {
        "bare": "bare read, probe's transport (make_client)",
        "httpx": "bare read, httpx defaults (anyio backend)",
        "probe": "probe_once",
    }
    rows = [[labels[kind], f"{per_request[kind] / 1e6:.3f}"] for kind in KINDS]
    print_table(["client", "M instructions/sample"], rows)
    probe = per_request["probe"]
    for kind in ("bare", "httpx"):
        ratio = probe / per_request[kind]
        verdict = "met" if ratio <= _GOAL else "NOT met"
        print(f"ratio probe / {labels[kind]}: {ratio:.3f}× (goal ≤ {_GOAL}×: {verdict})")
    print(f"the probe's own instructions: {(probe - per_request['bare']) / 1e3:.0f} k per sample")


def main(count: int) -> None:
    print_header("probe_cpu_instructions", f"instructions per sample under callgrind, {count} each")
    clock = RunClock()
    with SimProcess(FAST, max_seconds=_RUN_TIMEOUT_S) as sim:
        _report(_per_request(sim.url, count))
    print(f"finished in {clock.report()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=30, help="measured requests per kind")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, count, url, toggle = args.child
        asyncio.run(_child(kind, int(count), url, toggle))
    else:
        main(args.samples)
