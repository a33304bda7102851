"""Every decision of a backtest, written down: for a speed-up that must change none of them.

Replays a CSV in this process (the backtest's own reader and ``replay``) and writes one line
per signal the evaluator applied (its identity and the ``repr`` of its finding, numbers
included) and one per transition (alert ids aside, every other field). Two trees' outputs
compared byte for byte say whether a change moved any decision, not only the alerts.

    PYTHONPATH=. .venv/bin/python -m bench.replay_findings --csv /tmp/fleet12.csv --out before.txt
    PYTHONPATH=. .venv/bin/python -m bench.replay_findings --csv /tmp/fleet12.csv --out after.txt
    cmp before.txt after.txt

``--profile F`` writes a cProfile of the replay to F as well (pstats format).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from app.alerts.backtest.csvruns import read_runs
from app.alerts.backtest.jobs import ParamsTable, collecting_rarely
from app.alerts.backtest.replay import replay
from app.alerts.evaluate import Evaluator
from app.alerts.identity import Identity, Transition


def watch_apply(out: IO[str]) -> Callable[[], None]:
    """Wrap ``Evaluator.apply`` so that every signal it is given is written to ``out``;
    returns the function that puts the original back."""
    original = Evaluator.apply

    def apply(self: Evaluator, signals: Mapping[Identity, Any], now: Any, rules: Any) -> Any:
        for identity, finding in signals.items():
            out.write(f"signal {now.isoformat()} {identity!r} {finding!r}\n")
        return original(self, signals, now, rules)

    Evaluator.apply = apply  # type: ignore[method-assign]

    def restore() -> None:
        Evaluator.apply = original  # type: ignore[method-assign]

    return restore


def transition_line(transition: Transition) -> str:
    facts = transition.to_json()
    del facts["alert_id"]
    facts["acknowledged"] = transition.acknowledged
    return "transition " + json.dumps(facts, sort_keys=True, default=repr) + "\n"


def run(csv: Path, out: IO[str], seed: int = 0) -> int:
    """Replay ``csv`` writing every signal and transition to ``out``; the transitions' count."""
    restore = watch_apply(out)
    count = 0
    try:
        with csv.open(newline="") as rows, collecting_rarely():
            for transition in replay(read_runs(rows), ParamsTable(), seed=seed):
                out.write(transition_line(transition))
                count += 1
    finally:
        restore()
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--csv", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", type=Path, help="write a cProfile of the replay here")
    args = parser.parse_args()
    profiler = cProfile.Profile(time.process_time) if args.profile else None
    started = time.process_time()
    with args.out.open("w") as out:
        if profiler is not None:
            profiler.enable()
        count = run(args.csv, out, args.seed)
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(args.profile)
    spent = time.process_time() - started
    print(f"{count} transitions, replay CPU {spent:.2f} s, written to {args.out}")  # noqa: T201


if __name__ == "__main__":
    main()
