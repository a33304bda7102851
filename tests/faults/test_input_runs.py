"""What an agent pushes is checked at the door of a real ``serve`` (real HTTP, gzip bodies):
a run with a negative phase is answered 422 naming the field and never stored; a batch
with an infinite phase in one run stores its mates; a run dated 9999 is refused, so it
cannot resolve a firing ``vantage_silent``; ``/metrics`` counts every refusal by kind.
"""

from __future__ import annotations

import gzip
import json
import math
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from app.agents.wire import BATCH_PATH, RUNS_PATH, VANTAGE_HEADER
from app.store.records import RunRecord
from tests.faults.support import stored
from tests.helpers import eventually
from tests.pgcluster import Serve
from tests.runfactory import make_run, record_of

pytestmark = pytest.mark.process

TOKEN = "fra-token-0123456789abcdef"
CONFIG = f"""\
vantages:
  fra-1: {{token: {TOKEN}}}
vantage_silent_after: 2
targets:
  - name: chat
    url: http://chat.invalid/
    interval: 1s
    vantages: [fra-1]
"""


def a_run(seed: int) -> RunRecord:
    at = datetime.now(UTC) - timedelta(minutes=1)
    made = make_run(np.random.default_rng(seed), at, target="chat", vantage="fra-1", n=3)
    return record_of(made)


def with_phase(record: RunRecord, phase: str, value: float) -> RunRecord:
    first = record.samples[0]
    sample = replace(first, phases={**first.phases, phase: value})
    return replace(record, samples=(sample, *record.samples[1:]))


def post(served: Serve, path: str, body: Any) -> httpx.Response:
    headers = {
        "Authorization": f"Bearer {TOKEN}",
        VANTAGE_HEADER: "fra-1",
        "Content-Encoding": "gzip",
        "Content-Type": "application/json",
    }
    content = gzip.compress(json.dumps(body).encode())  # an infinity goes as `Infinity`
    return httpx.post(f"{served.base_url}{path}", content=content, headers=headers, timeout=10)


def silent_alert(served: Serve) -> Callable[[], dict[str, Any] | None]:
    def firing() -> dict[str, Any] | None:
        answer = httpx.get(f"{served.base_url}/api/v1/alerts", params={"limit": 100}, timeout=5)
        found = [a for a in answer.json()["items"] if a["kind"] == "vantage_silent"]
        return next((a for a in found if a["state"] == "firing"), None)

    return firing


def refused_count(served: Serve, reason: str) -> float:
    text = httpx.get(f"{served.base_url}/metrics", timeout=5).text
    line = f'phasewatch_runs_refused_total{{reason="{reason}",vantage="fra-1"}} '
    found = [row for row in text.splitlines() if row.startswith(line)]
    return float(found[0].removeprefix(line)) if found else 0.0


def test_runs_that_fail_the_door_are_refused_counted_and_never_stored(
    tmp_path: Path, serve: Callable[..., Serve]
) -> None:
    config = tmp_path / "phasewatch.yaml"
    config.write_text(CONFIG)
    url = f"sqlite:///{tmp_path}/pw.db"
    served = serve("serve", config, PHASEWATCH_DATABASE_URL=url)
    served.wait_ready()
    heard = a_run(0)  # heard once, fra-1 is silent after two 1 s intervals (not START_GRACE)
    assert post(served, RUNS_PATH, heard.to_json()).status_code == 200
    alert = eventually(silent_alert(served), 30, "fra-1 silent")

    # Row 3: a run dated 9999 is refused and leaves the alert firing.
    future = replace(a_run(1), started_at=datetime(9999, 12, 31, tzinfo=UTC), finished_at=None)
    answer = post(served, RUNS_PATH, future.to_json())
    assert answer.status_code == 422, answer.text
    assert "started_at: 9999-12-31" in answer.text
    checked = time.monotonic()
    eventually(lambda: time.monotonic() - checked > 3, 10, "three checks of silence")
    still = silent_alert(served)()
    assert still is not None and still["id"] == alert["id"]

    # Row 1: a negative phase is 422, naming the field; nothing is stored.
    answer = post(served, RUNS_PATH, with_phase(a_run(2), "queue", -5.0).to_json())
    assert answer.status_code == 422, answer.text
    assert "samples[0].phases.queue: -5.0 is negative" in answer.text
    assert [run.id for run in stored(url)] == [str(heard.id)]

    # Row 2: an infinite phase is refused in its batch; its mates are stored.
    mates = [a_run(3), a_run(4)]
    bad = with_phase(replace(a_run(5), id=uuid.uuid4()), "prefill", math.inf)
    body = {"runs": [mates[0].to_json(), bad.to_json(), mates[1].to_json()]}
    answer = post(served, BATCH_PATH, body)
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert [r["outcome"] for r in results] == ["stored", "refused", "stored"]
    assert results[1]["reason"] == "samples[0].phases.prefill: inf is not finite"
    assert {run.id for run in stored(url)} == {str(r.id) for r in (heard, *mates)}

    assert (refused_count(served, "time"), refused_count(served, "phase")) == (1.0, 2.0)
    log = served.output()
    assert log.count("refused a run of chat from vantage fra-1 (phase;") == 1
