"""Detection benchmark: labelled sample streams, baselines, and a scorer for ``backtest``.

    .venv/bin/python -m bench.detection.run --seed 1

See bench/detection/README.md for the scenarios and the scoring rules.
"""
