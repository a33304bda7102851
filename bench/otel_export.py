"""What the OpenTelemetry export adds to the store's thread per stored run: ``export`` of a
20-sample streamed LLM run (histogram records, 20 sample spans and 120 phase spans queued),
beside ``RunMetrics.observe_run`` (the /metrics road it follows), with the collector a
loopback receiver and with it refusing. Bounded: ``--runs`` runs per case (default 300).

    .venv/bin/python -m bench.otel_export
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

from app.config import Target
from app.export.otlp import OtlpExporter
from app.runtime.metrics import RunMetrics
from app.store.records import RunRecord, SampleRecord
from tests.helpers import free_port
from tests.otlpreceiver import OtlpReceiver

PHASES = {"connect": 1.0, "network": 8.0, "queue": 40.0, "prefill": 20.0, "generation": 100.0}
TARGET = Target(
    name="chat", kind="openai", url="http://127.0.0.1:1/v1/chat/completions", body={"model": "m"}
)


def a_run(n: int = 20) -> RunRecord:
    now = datetime.now(UTC)
    samples = tuple(
        SampleRecord(
            idx=i,
            started_at=now,
            status="ok",
            total_ms=sum(PHASES.values()) + 0.5,
            phases=PHASES | {"transfer": 0.5},
            marks={"first_answer_token": 70_000_000, "last_answer_token": 169_000_000},
            details={"tokens": {"prompt": 12, "completion": 50}, "http_version": "HTTP/1.1"},
            http_status=200,
        )
        for i in range(n)
    )
    return RunRecord(uuid.uuid4(), "chat", "bench", now, "complete", samples=samples)


def per_run_us(step: Callable[[RunRecord], object], runs: int) -> list[float]:
    found = []
    for _ in range(runs):
        run = a_run()
        began = time.perf_counter()
        step(run)
        found.append((time.perf_counter() - began) * 1e6)
    return found


def line(name: str, us: list[float]) -> str:
    cuts = statistics.quantiles(us, n=100)
    return f"| {name} | {statistics.median(us):.0f} | {cuts[98]:.0f} |"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=300)
    runs = parser.parse_args().runs
    print("| per stored run (20 samples) | median µs | p99 µs |\n|---|---|---|")
    print(line("RunMetrics.observe_run (/metrics)", per_run_us(RunMetrics().observe_run, runs)))
    with OtlpReceiver() as receiver:
        urls = {"metrics": f"{receiver.url}/v1/metrics", "traces": f"{receiver.url}/v1/traces"}
        otlp = OtlpExporter(urls)
        us = per_run_us(lambda run: otlp.export(run, TARGET), runs)
        otlp.close()
        print(line("OtlpExporter.export, collector answering", us))
        print(f"(the receiver decoded {len(receiver.spans())} spans)")
    dead = f"http://127.0.0.1:{free_port()}"
    refused = OtlpExporter({"metrics": f"{dead}/v1/metrics", "traces": f"{dead}/v1/traces"})
    print(line("OtlpExporter.export, collector refusing", per_run_us(
        lambda run: refused.export(run, TARGET), runs)))  # fmt: skip
    print(f"failures counted: {refused.failures()}")


if __name__ == "__main__":
    main()
