"""`phasewatch` as a child process under resource limits, with the peak memory it used.

The limits make a runaway child stop by itself (the kernel ends it) instead of the test
waiting on a clock: address space for memory, CPU seconds for a loop.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ADDRESS_SPACE = 2**30  # ~180 MB of it is mapped at start; a bomb hits the rest in seconds
CPU_SECONDS = 60
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Finished:
    code: int
    out: str
    err: str
    # The child's own high-water mark (wait4), not any other child's; it starts at the size
    # of the process that forked it, so compare it with an idle child's.
    peak_rss_mb: float


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Ours, with this checkout's ``app`` first on the path (the child runs elsewhere)."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return os.environ | {"PYTHONPATH": path} | dict(extra or {})


def run_limited(args: list[str], cwd: Path, env: Mapping[str, str] | None = None) -> Finished:
    """``python -m app ARGS`` in ``cwd``; its environment is ours plus ``env``."""
    out_path, err_path = cwd / "child.out", cwd / "child.err"
    with out_path.open("w") as out, err_path.open("w") as err:
        child = subprocess.Popen(
            [sys.executable, "-m", "app", *args],
            cwd=cwd,
            env=child_env(env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            preexec_fn=_limit,
        )
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
    return Finished(
        code=child.returncode,
        out=out_path.read_text(),
        err=err_path.read_text(),
        peak_rss_mb=usage.ru_maxrss / 1024,  # kilobytes on Linux
    )
