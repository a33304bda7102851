"""The servers ``bench.agents_ingest`` pushes to: one ``phasewatch serve`` or several
replicas on one PostgreSQL, each its own process, port and spool; their CPU (and that of
the database's backends serving them) read from /proc; what each says on /metrics about
the evaluations of runs whose target another replica owns (asked of the owner, claimed
here); and py-spy's samples of each during a phase, when ``--profile`` asks.

A replica that joins others takes its share of the targets two renewals after its first
(``app.replicas.membership``): the phases begin once every replica reads every lease and
the shares add up to the whole targets file, so no target changes hands mid-phase.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx

START_S = 120.0  # at most, for a serve to answer (a busy machine starts it slowly)
SETTLE_S = 60.0  # at most, for the replicas to share the targets out
_METRIC = re.compile(r'^(phasewatch_replicas?_\w+?)(?:_total)?(?:\{way="(\w+)"\})? (\S+)$')
LIVE, TARGETS = "phasewatch_replicas_live", "phasewatch_replica_targets"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_s(pid: int) -> float:
    """User and system CPU of ``pid`` so far (0 for a process gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def backends_cpu_s(database: str) -> dict[int, float]:
    """CPU so far of each PostgreSQL backend connected to ``database`` (its process title
    names it: ``postgres: [CLUSTER:] USER DATABASE HOST(PORT) STATE``)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            title = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        words = title.split()
        if words[:1] == ["postgres:"] and database in words[1:4]:
            found[int(entry.name)] = cpu_s(int(entry.name))
    return found


def metrics_of(port: int) -> dict[str, float]:
    """This replica's ``phasewatch_replica*`` lines by name, the evaluations' by their
    ``way`` (``asked``, ``claimed``); empty when it does not answer."""
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    except httpx.HTTPError:
        return {}
    found = {}
    for line in text.splitlines():
        match = _METRIC.match(line)
        if match:
            found[match.group(2) or match.group(1)] = float(match.group(3))
    return found


@dataclass
class Servers:
    """``count`` serve processes on ``url``, started by ``start``, stopped by ``stop``."""

    command: list[str]
    env: dict[str, str]
    tmp: Path
    count: int
    ports: list[int] = field(default_factory=list)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[IO[str]] = field(default_factory=list)

    def start(self) -> None:
        for k in range(self.count):
            port = free_port()
            log = (self.tmp / f"serve-{k}.log").open("w")
            env = self.env | {"PHASEWATCH_SPOOL_DIR": str(self.tmp / f"spool-{k}")}
            command = [*self.command, "--port", str(port), "--log-level", "warning"]
            self.procs.append(
                subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
            )
            self.ports.append(port)
            self.logs.append(log)

    @property
    def pids(self) -> list[int]:
        return [proc.pid for proc in self.procs]

    def wait_ready(self, targets: int) -> None:
        """Every replica answers /healthz and, with several, every one reads all leases and
        their shares add up to ``targets``."""
        deadline = time.monotonic() + START_S + (SETTLE_S if self.count > 1 else 0)
        while time.monotonic() < deadline:
            if self._ready(targets):
                return
            time.sleep(0.5)
        raise SystemExit(f"the replicas did not settle: {[metrics_of(p) for p in self.ports]}")

    def _ready(self, targets: int) -> bool:
        for port in self.ports:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code != 200:
                    return False
            except httpx.HTTPError:
                return False
        if self.count == 1:
            return True
        seen = [metrics_of(port) for port in self.ports]
        live = all(m.get(LIVE) == self.count for m in seen)
        return live and sum(m.get(TARGETS, 0) for m in seen) == targets

    def stop(self) -> None:
        for proc in self.procs:
            proc.send_signal(signal.SIGTERM)
        for proc, log in zip(self.procs, self.logs, strict=True):
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
            log.close()


class Profiles:
    """py-spy (``--gil``: the samples that hold the interpreter's lock, i.e. its Python
    CPU) on each server for one phase, raw output to ``out``; nothing when py-spy is
    neither on the PATH nor beside the interpreter."""

    def __init__(self, pids: list[int], seconds: float, out: Path, phase: str) -> None:
        spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        self.running: list[subprocess.Popen[bytes]] = []
        if seconds <= 0 or not Path(spy).exists():
            return
        out.mkdir(parents=True, exist_ok=True)
        for k, pid in enumerate(pids):
            raw = out / f"{phase}-replica{k}.txt"
            command = [spy, "record", "--pid", str(pid), "--duration", str(int(seconds))]
            command += ["--rate", "100", "--format", "raw", "--gil", "--nonblocking"]
            command += ["--output", str(raw)]
            self.running.append(
                subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            )

    def wait(self) -> None:
        for proc in self.running:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
