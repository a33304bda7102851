"""Prometheus (Debian's ``prometheus`` package: ``prometheus`` and ``promtool``) for the tests
of the metric names, the shipped rules and the dashboard: promtool run on files, and a
Prometheus of the test's own on loopback, with a temporary config and data folder, stopped
by its PID."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.helpers import free_port
from tests.real.parts import ROOT, missing, stop, wait_until_answering

REQUIRE = "PHASEWATCH_REQUIRE_PROMETHEUS"
PROMETHEUS = os.environ.get("PHASEWATCH_TEST_PROMETHEUS", "/usr/bin/prometheus")
PROMTOOL = os.environ.get("PHASEWATCH_TEST_PROMTOOL", "/usr/bin/promtool")
DOCS = ROOT / "docs"
RULES = DOCS / "prometheus" / "rules.yml"
ALERTS = DOCS / "prometheus" / "alerts.yml"
DASHBOARD = DOCS / "grafana" / "phasewatch.json"

CONFIG = """\
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: [{rules}, {alerts}]
scrape_configs:
  - job_name: phasewatch
    static_configs: [{{targets: ["{target}"]}}]
"""


def binary(path: str) -> str:
    found = shutil.which(path)
    if found is None:
        how = f"{path} not found: apt-get install prometheus (.ci/run does)"
        missing("Prometheus", REQUIRE, how)
    assert found is not None
    return found


def promtool(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [binary(PROMTOOL), *args]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=120)


@dataclass
class Prometheus:
    url: str
    dir: Path

    def query(self, expr: str) -> dict[str, Any]:
        """``/api/v1/query``'s whole answer (``status``, ``data`` or ``error``)."""
        answer = httpx.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=10)
        body: dict[str, Any] = answer.json()
        return body

    def get(self, path: str) -> Any:
        answer = httpx.get(f"{self.url}{path}", timeout=10)
        answer.raise_for_status()
        return answer.json()["data"]

    def log(self) -> str:
        return (self.dir / "prometheus.log").read_text(errors="replace")


@contextmanager
def running_prometheus(
    workdir: Path, target: str, rules: Sequence[Path] = ()
) -> Iterator[Prometheus]:
    """A Prometheus scraping ``target`` (host:port) every second, evaluating ``rules``
    (default: the shipped ones) every second."""
    prometheus = binary(PROMETHEUS)
    rules = rules or (RULES, ALERTS)
    port = free_port()
    config = CONFIG.format(rules=rules[0], alerts=rules[-1], target=target)
    (workdir / "prometheus.yml").write_text(config)
    command = [prometheus, f"--config.file={workdir / 'prometheus.yml'}"]
    command += [f"--storage.tsdb.path={workdir / 'data'}", f"--web.listen-address=127.0.0.1:{port}"]
    with (workdir / "prometheus.log").open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_answering(f"{url}/-/ready", process, workdir / "prometheus.log")
        yield Prometheus(url, workdir)
    finally:
        stop(process)
