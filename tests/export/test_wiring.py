"""Every stored run reaches the export after /metrics, with its target as the file says now
(``app.main.counted``: the service's after_store and the count of pushed runs both use it)."""

from __future__ import annotations

from app.config import TargetsFile
from app.export.exporter import MemoryExporter
from app.main import counted
from app.runtime.metrics import RunMetrics
from app.runtime.rules import AlertRules
from tests.export.test_mapping import CHAT, run, sample


def stored(observed: RunMetrics, target: str) -> float | None:
    labels = {"target": target, "vantage": "eu-1"}
    return observed.registry.get_sample_value("phasewatch_runs_stored_total", labels)


def test_a_stored_run_is_counted_then_exported_and_a_target_gone_is_counted_only() -> None:
    memory, observed = MemoryExporter(), RunMetrics()
    rules = AlertRules(TargetsFile(targets=[CHAT]))
    count = counted(observed, memory, rules)
    assert count is not None
    count(run(sample(phases={"queue": 1.0})))
    assert [span.name for span in memory.spans] == ["chat qwen3-8b", "queue"]
    assert stored(observed, "chat") == 1
    count(run(sample(), target="gone"))  # an imported run, a target removed since
    assert len(memory.spans) == 2 and stored(observed, "gone") == 1


def test_without_an_exporter_the_count_is_metrics_alone() -> None:
    observed = RunMetrics()
    rules = AlertRules(TargetsFile())
    assert counted(observed, None, rules) == observed.observe_run
    assert counted(None, None, rules) is None
