"""Where a run's CPU goes in a real ``serve``: py-spy's samples of it, by component.

``py-spy record --pid`` samples the process's active threads (idle ones are left out), and
each stack is put in the first component whose modules it passes through, in the order of
``COMPONENTS`` (a run's evaluation happens on the writer's thread after the store: its
frames are the alert engine's, so it is checked before the store). The shares, times the
CPU a run measured from /proc, give milliseconds a run by component.

    .venv/bin/python -m bench.fleet_profile --raw serve-profile.txt
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections import Counter
from pathlib import Path

# (component, module paths any of whose frames puts a stack in it), checked in order.
COMPONENTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("rollup", ("store/rollups/",)),
    ("evaluation", ("app/alerts/", "alerts/engine.py", "store/dbhistory.py", "app/analysis/")),
    ("store", ("runs/dbsink.py", "store/ingest.py", "runs/writer.py", "runs/spool")),
    ("probe", ("app/probe/", "runs/pipeline.py", "httpx/", "httpcore/", "h11/", "h2/")),
)
OTHER = "other (event loop, web, upkeep)"


def component(stack: str) -> str:
    for name, markers in COMPONENTS:
        if any(marker in stack for marker in markers):
            return name
    return OTHER


def shares(raw: str) -> dict[str, float]:
    """Each component's share of the samples in py-spy's raw (collapsed) output."""
    counts: Counter[str] = Counter()
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            counts[component(stack)] += int(count)
    total = sum(counts.values())
    return {name: counts[name] / total for name in counts} if total else {}


def record(pid: int, seconds: float, out: Path) -> str:
    """py-spy's raw samples of ``pid`` for ``seconds`` (empty if py-spy cannot attach)."""
    spy = Path(sys.executable).with_name("py-spy")
    command = [str(spy), "record", "--pid", str(pid), "--duration", str(int(seconds))]
    command += ["--rate", "250", "--format", "raw", "--output", str(out), "--nonblocking", "--gil"]
    try:
        subprocess.run(command, capture_output=True, timeout=seconds + 60, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        print(f"    (no profile: {exc})")
        return ""
    return out.read_text()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--raw", type=Path, required=True, help="py-spy's raw output")
    args = parser.parse_args()
    for name, share in sorted(shares(args.raw.read_text()).items(), key=lambda kv: -kv[1]):
        print(f"{name}: {share * 100:.1f} %")


if __name__ == "__main__":
    main()
