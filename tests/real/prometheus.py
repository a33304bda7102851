"""Prometheus (Debian's ``prometheus`` package: ``prometheus`` and ``promtool``) for the tests
of the metric names, the shipped rules and the dashboard: promtool run on files, and a
Prometheus of the test's own on loopback, with a temporary config and data folder, stopped
by its PID."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.helpers import free_port
from tests.real.parts import ROOT, missing, stop, wait_until_answering

REQUIRE = "PHASEWATCH_REQUIRE_PROMETHEUS"
PROMETHEUS = os.environ.get("PHASEWATCH_TEST_PROMETHEUS", "/usr/bin/prometheus")
PROMTOOL = os.environ.get("PHASEWATCH_TEST_PROMTOOL", "/usr/bin/promtool")
DOCS = ROOT / "docs"
RULES = DOCS / "prometheus" / "rules.yml"
ALERTS = DOCS / "prometheus" / "alerts.yml"
DASHBOARD = DOCS / "grafana" / "phasewatch.json"

# Scraped every 3 s, each scrape given 3 s: /metrics waits up to 2 s for its database reads
# (app.runtime.scraped.DATABASE_BUDGET_S), and on a loaded machine a 1 s timeout failed
# scrapes, each leaving every series stale until the next.
CONFIG = """\
global:
  scrape_interval: 3s
  scrape_timeout: 3s
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
    """A Prometheus scraping ``target`` (host:port) every 3 seconds, evaluating ``rules``
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


# --- The expressions the shipped files hold ---------------------------------------------

# What Grafana puts in place of the dashboard's variables: every target, vantage and phase.
DASHBOARD_VARIABLES = {"$__rate_interval": "1m", "$target": ".+", "$vantage": ".+", "$phase": ".+"}


def _rules(path: Path, kind: str) -> list[str]:
    groups = yaml.safe_load(path.read_text())["groups"]
    return [str(rule["expr"]) for group in groups for rule in group["rules"] if kind in rule]


def recorded_exprs() -> list[str]:
    return _rules(RULES, "record")


def alert_exprs() -> list[str]:
    return _rules(ALERTS, "alert")


def dashboard_exprs() -> list[str]:
    """Every panel query, and the selector inside each variable's ``label_values(…)``."""
    dashboard = json.loads(DASHBOARD.read_text())
    found = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        inner = re.fullmatch(r"label_values\((.+), \w+\)", variable.get("definition", ""))
        if inner:
            found.append(inner[1])
    return [_filled(expr) for expr in found]


def _filled(expr: str) -> str:
    for name, value in DASHBOARD_VARIABLES.items():
        expr = expr.replace(name, value)
    return expr


def without_data(prometheus: Prometheus, exprs: list[str]) -> list[tuple[str, object]]:
    """The expressions whose answer is an error or holds no finite number."""
    missing = []
    for expr in exprs:
        answer = prometheus.query(expr)
        values = [float(r["value"][1]) for r in answer.get("data", {}).get("result", [])]
        if answer["status"] != "success" or not any(math.isfinite(v) for v in values):
            missing.append((expr, answer.get("error", values)))
    return missing


def active_alerts(prometheus: Prometheus) -> set[tuple[str, str]]:
    """(alert name, target) of every pending or firing alert."""
    alerts = prometheus.get("/api/v1/alerts")["alerts"]
    return {(a["labels"]["alertname"], a["labels"].get("target", "")) for a in alerts}
