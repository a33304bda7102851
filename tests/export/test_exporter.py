"""The ``RunExporter`` contract over every implementation: the memory one, and the OTLP one
against a loopback receiver decoding the protobuf (tests/otlpreceiver.py)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator

import pytest

from app.export.environment import endpoints, exporter_from_environment
from app.export.exporter import MemoryExporter, RunExporter
from app.export.otlp import OtlpExporter
from tests.export.test_mapping import CHAT, HEALTH, run, sample
from tests.helpers import free_port
from tests.otlpreceiver import OtlpReceiver

Exported = Callable[[], list[str]]  # the names of the spans exported so far


@pytest.fixture(params=["memory", "otlp"])
def exporter(request: pytest.FixtureRequest) -> Iterator[tuple[RunExporter, Exported]]:
    if request.param == "memory":
        memory = MemoryExporter()
        yield memory, lambda: [span.name for span in memory.spans]
        return
    with OtlpReceiver() as receiver:
        otlp = OtlpExporter({"metrics": f"{receiver.url}/v1/metrics"} | traces(receiver))
        yield otlp, lambda: [span.name for span in receiver.spans()]
        otlp.close()


def traces(receiver: OtlpReceiver) -> dict[str, str]:
    return {"traces": f"{receiver.url}/v1/traces"}


def test_an_exported_run_arrives_once_closed(exporter: tuple[RunExporter, Exported]) -> None:
    found, exported = exporter
    found.export(run(sample(phases={"connect": 1.0, "queue": 2.0})), CHAT)
    found.close()
    assert sorted(exported()) == ["chat qwen3-8b", "connect", "queue"]
    assert found.failures() in ({}, {"metrics": 0, "traces": 0}) and found.problems() == []


def test_a_run_without_its_target_and_runs_after_close_are_dropped(
    exporter: tuple[RunExporter, Exported],
) -> None:
    found, exported = exporter
    found.export(run(sample()), None)
    found.close()
    found.export(run(sample(), target="health"), HEALTH)
    found.close()  # twice: no harm
    assert exported() == []


def test_export_never_raises_for_a_run_it_cannot_map(
    exporter: tuple[RunExporter, Exported],
) -> None:
    found, _ = exporter
    odd = sample(phases={"warp": 1.0}, details={"tokens": "many", "http_version": 2})
    found.export(run(odd), CHAT)  # an unknown phase goes last; odd details are left out
    found.close()


def test_an_unreachable_collector_costs_a_counter_and_one_log_line_not_a_wait(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")  # the SDK's retries give up sooner
    dead = f"http://127.0.0.1:{free_port()}"
    otlp = OtlpExporter({"traces": f"{dead}/v1/traces", "metrics": f"{dead}/v1/metrics"})
    caplog.set_level(logging.INFO, logger="app.export")
    began = time.monotonic()
    for _ in range(200):
        otlp.export(run(sample()), CHAT)
    assert time.monotonic() - began < 5.0  # a hang bound, not a speed claim
    otlp.close()  # flushes: the export fails (connection refused), is counted and said once
    assert otlp.failures()["traces"] >= 1 and otlp.failures()["metrics"] >= 1
    named = sorted(problem.split(" export")[0] for problem in otlp.problems())
    assert named == ["OpenTelemetry metrics", "OpenTelemetry traces"]
    said = [r.getMessage() for r in caplog.records if "failed; dropped" in r.getMessage()]
    assert len(said) == 2, said  # once per signal, however many attempts failed


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, {}),
        ({"OTEL_SERVICE_NAME": "x"}, {}),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"},
            {"metrics": "http://c:4318/v1/metrics", "traces": "http://c:4318/v1/traces"},
        ),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t/x"}, {"traces": "http://t/x"}),
        ({"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://m/y"}, {"metrics": "http://m/y"}),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_TRACES_EXPORTER": "none"},
            {"metrics": "http://c/v1/metrics"},
        ),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_SDK_DISABLED": "true"}, {}),
    ],
)
def test_export_is_off_unless_an_otlp_endpoint_is_set(
    environ: dict[str, str], expected: dict[str, str]
) -> None:
    assert endpoints(environ) == expected
    if not expected:
        assert exporter_from_environment(environ) is None
