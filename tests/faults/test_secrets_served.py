"""The planted secrets of test_secrets_cuts.py, followed past the probe: through the real
pipeline into the database (SQLite and PostgreSQL), and out of every response that serves
sample data — ``/api/v1/samples``, ``/api/v1/samples.csv``, ``/api/v1/runs/{id}`` — and of
``phasewatch probe --json``. Every offset around every cut, for each drawn secret."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from sqlalchemy import text

from app.config import Target, TargetsFile
from app.probe.spec import Kind
from app.store.models import Base
from app.store.records import RunRecord
from tests.apiapp import Api, api
from tests.clirun import run_cli
from tests.faults.plants import (
    BODY,
    FILLER,
    PLANTS,
    SECRET,
    Answers,
    Plant,
    answering_in_thread,
    fillers,
    leaks,
    secret_headers,
    secrets,
)

pytestmark = pytest.mark.timeout(600)


@settings(
    max_examples=2,
    deadline=None,
    # No shrinking: an example takes seconds, and a failure names its secret and field.
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(secret=secrets, filler=fillers)
@example(secret=SECRET, filler=FILLER)
def test_planted_secrets_reach_no_row_and_no_response_that_serves_samples(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], secret: str, filler: str
) -> None:
    outputs: dict[str, str] = {}
    with answering_in_thread() as (answers, url), api(db_url, tmp_path, TargetsFile()) as served:
        for kind in (Kind.HTTP, Kind.OPENAI):
            plants = [plant for plant in PLANTS if plant.kind is kind]
            record = probe_and_store(served, answers, url, plants, secret, filler)
            outputs |= served_outputs(served, record)
            outputs[f"probe --json, {kind}"] = probe_json(
                answers, url, plants, secret, filler, capsys
            )
        outputs["database"] = database_dump(served)
    assert "<redacted>" in outputs["database"]
    leaked = {name: found for name, text in outputs.items() if (found := leaks(secret, text))}
    assert not leaked, f"{secret!r} leaked: {leaked}"


def planted(answers: Answers, plants: list[Plant], secret: str, filler: str) -> int:
    """Plan one answer per plant and offset; how many."""
    before = len(answers.planned)
    for plant in plants:
        for offset in plant.offsets(secret):
            answers.planned.append(plant.response(plant.text(secret, offset, filler)))
    return len(answers.planned) - before


def probe_and_store(
    served: Api, answers: Answers, url: str, plants: list[Plant], secret: str, filler: str
) -> RunRecord:
    """One run of the real pipeline (probe, store, alerts), a sample per planted answer."""
    count = planted(answers, plants, secret, filler)
    kind = plants[0].kind
    fields = {"body": BODY} if kind is not Kind.HTTP else {}
    name = f"planted-{kind.value}-{uuid.uuid4().hex[:8]}"  # the database outlives an example
    target = Target(
        name=name, kind=kind, url=url, headers=secret_headers(secret), samples=count, **fields
    )
    record = asyncio.run(served.service.pipeline.run(target))
    assert len(record.samples) == count and not answers.planned
    return record


def served_outputs(served: Api, record: RunRecord) -> dict[str, str]:
    client, name = served.client, record.target
    run = client.get(f"/api/v1/runs/{record.id}")
    samples = client.get("/api/v1/samples", params={"target": name, "limit": 1000})
    csv = client.get("/api/v1/samples.csv", params={"target": name})
    for response in (run, samples, csv):
        assert response.status_code == 200, response.text
    assert len(run.json()["samples"]) == len(record.samples)
    assert len(samples.json()["items"]) == len(record.samples)
    return {
        f"/api/v1/runs/{{id}} of {name}": run.text,
        f"/api/v1/samples of {name}": samples.text,
        f"/api/v1/samples.csv of {name}": csv.text,
    }


def probe_json(
    answers: Answers,
    url: str,
    plants: list[Plant],
    secret: str,
    filler: str,
    capsys: pytest.CaptureFixture[str],
) -> str:
    count = planted(answers, plants, secret, filler)
    argv = ["probe", url, "--samples", str(count), "--json"]
    argv += [f"--header={name}: {value}" for name, value in secret_headers(secret).items()]
    if plants[0].kind is not Kind.HTTP:
        argv += ["--kind", plants[0].kind.value, "--body", json.dumps(BODY)]
    code, out, err = run_cli(argv, capsys)
    samples = json.loads(out)["samples"]
    assert code == (0 if any(s["status"] == "ok" for s in samples) else 1), err
    assert len(samples) == count and not answers.planned
    return out + err


def database_dump(served: Api) -> str:
    with served.service.engine.connect() as connection:
        rows = [
            repr(row)
            for table in Base.metadata.sorted_tables
            for row in connection.execute(table.select())
        ]
        rows.append(repr(connection.execute(text("SELECT 1")).all()))
    return "\n".join(rows)
