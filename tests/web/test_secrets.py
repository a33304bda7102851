"""A secret planted in target headers (through ``${ENV}``) appears in no output: not in any
page or API response (every GET route the app registers), not in /metrics, logs, stored
rows, notifications, the CSV export, nor what `check-config` and `probe` print.

The probed endpoints are real loopback servers, and they misbehave the way real ones do:
one answers every request with a 401 whose error message repeats the key it was sent (as
OpenAI's does), one is not listening, one is too slow for the deadline, one has no such path.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import re
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from app.cli.service import quiet_chatty_loggers
from app.clock import utcnow
from app.config import Settings, load_targets
from app.demo.sim.server import SimServer
from app.main import create_app
from app.probe.redact import Redactor, has_control_character, scrub_secrets
from app.runtime.service import Service
from app.runtime.targetsync import target_values
from app.store.models import AlertRow, Base, RunRow, TargetRow
from app.store.targets import sync_targets
from tests.apiapp import TOKEN, http_routes, serving
from tests.clirun import run_cli

SECRET = "sk-PLANTED-5f0c2e9a7b1d4c36a8e2f4b6d8c0a1e3"
RUNS = 4  # enough for probe_failing to fire (pending after 3 failing runs, firing at 4)


class Echo(BaseHTTPRequestHandler):
    """An API that rejects the key and repeats it back; ``/hook`` records notifications."""

    received: list[bytes] = []

    def do_GET(self) -> None:
        self._reject()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        if self.path == "/hook":
            Echo.received.append(body)
            self._send(200, b"{}", {})
            return
        self._reject()

    def _reject(self) -> None:
        key = self.headers.get("authorization", "").removeprefix("Bearer ")
        message = {"error": {"message": f"Incorrect API key provided: {key}", "code": "bad_key"}}
        challenge = {"www-authenticate": f'Bearer error="invalid_token", key="{key}"'}
        self._send(401, json.dumps(message).encode(), challenge)

    def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in {"content-type": "application/json", **headers}.items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def echo() -> Iterator[str]:
    Echo.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def targets_yaml(echo: str, sim: str, refused: int) -> str:
    secret = '{Authorization: "Bearer ${PW_PLANTED_KEY}", x-api-key: "${PW_PLANTED_KEY}"}'
    return f"""
notifiers:
  hook: {{type: webhook, url: "{echo}/hook"}}
targets:
  - {{name: echoing, kind: openai, url: "{echo}/v1/chat/completions",
      body: {{model: m, messages: [], stream: true}}, samples: 3, headers: {secret}}}
  - {{name: fine, url: "{sim}/http?server_ms=2", samples: 3, headers: {secret}}}
  - {{name: missing, url: "{sim}/nowhere", samples: 3, headers: {secret}}}
  - {{name: late, url: "{sim}/http?server_ms=300", samples: 2, deadline_ms: 20, headers: {secret}}}
  - {{name: refused, url: "http://127.0.0.1:{refused}/", samples: 2, headers: {secret}}}
"""


@pytest.fixture
def config(
    tmp_path: Path,
    echo: str,
    sim: SimServer,
    refused_port: int,
    monkeypatch: pytest.MonkeyPatch,
) -> Path:
    monkeypatch.setenv("PW_PLANTED_KEY", SECRET)
    # As a secret mounted from a file often is: with its newline. httpx would refuse the
    # header with an error that quotes it.
    monkeypatch.setenv("PW_PLANTED_KEY_NL", SECRET + "\n")
    path = tmp_path / "phasewatch.yaml"
    path.write_text(targets_yaml(echo, sim.url, refused_port))
    return path


def run_everything(service: Service) -> None:
    """What serve does, target by target: probe, store, evaluate alerts, notify."""
    with service.sessions.begin() as session:
        sync_targets(session, target_values(service.targets.targets), utcnow())

    async def probe_and_notify() -> None:
        for _ in range(RUNS):
            for target in service.targets.targets:
                await service.pipeline.run(target, scheduled_at=utcnow() - timedelta(seconds=1))
        assert service.sender is not None
        await service.sender.run_once()

    asyncio.run(probe_and_notify())


def fill(path: str, ids: dict[str, list[str]]) -> list[str]:
    """Every way to fill ``path``'s parameters from real ids."""
    names = [match[0] for match in re.findall(r"\{(\w+)(:\w+)?\}", path)]
    unknown = [name for name in names if name not in ids]
    assert not unknown, f"{path}: no ids for {unknown}; add them to the test"
    paths = []
    for values in itertools.product(*(ids[name] for name in names)):
        filled = path
        for value in values:
            filled = re.sub(r"\{\w+(:\w+)?\}", value, filled, count=1)
        paths.append(filled)
    return paths


def real_ids(service: Service) -> dict[str, list[str]]:
    with service.sessions() as session:
        alerts = [str(i) for i in session.scalars(select(AlertRow.id))]
        runs = [str(i) for i in session.scalars(select(RunRow.id))]
        targets = list(session.scalars(select(TargetRow.name)))
    silences = [str(s.id) for s in service.alerts.list_silences()]
    return {
        "alert_id": alerts,
        "run_id": runs,
        "silence_id": silences,
        "name": targets,
        "target": targets,
        "vantage": ["eu"],
    }


def every_get(
    client: httpx.Client, service: Service, routes: list[tuple[str, str]]
) -> tuple[str, list[str]]:
    """Every GET route, with every real id, bare and with the usual query parameters: what
    they answered, and which of them failed with a 5xx."""
    ids = real_ids(service)
    query = {"target": "echoing", "targets": "echoing,fine", "vantage": "eu", "limit": "500"}
    seen, failed = [], []
    for method, template in routes:
        if method != "GET":
            continue
        for path in fill(template, ids):
            for params in ({}, query, {"status": "error"}, {"format": "csv"}):
                try:
                    response = client.get(path, params=params)
                except httpx.HTTPError as exc:  # a response cut mid-stream
                    failed.append(f"{path} {params}: {exc!r}")
                    continue
                if response.status_code >= 500:
                    failed.append(f"{path} {params}: {response.status_code}")
                seen.append(f"{path} {response.status_code}\n{response.headers}\n{response.text}")
    return "\n".join(seen), failed


def database_dump(service: Service) -> str:
    with service.engine.connect() as connection:
        return "\n".join(
            repr(row)
            for table in Base.metadata.sorted_tables
            for row in connection.execute(table.select())
        )


def test_a_planted_secret_appears_in_no_output(
    config: Path,
    db_url: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    echo: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    quiet_chatty_loggers()  # as serve does
    settings = Settings(
        config=config,
        database_url=db_url,
        spool_dir=tmp_path / "spool",
        vantage="eu",
        api_token=TOKEN,
    )
    app = create_app(settings, load_targets(config))
    service: Service = app.state.service
    try:
        run_everything(service)
        with serving(app) as base, httpx.Client(base_url=base, timeout=30) as client:
            writes(client)
            pages, failed = every_get(client, service, http_routes(app))
        dump = database_dump(service)
    finally:
        service.engine.dispose()
    outputs = {
        "responses": pages,
        "database": dump,
        "notifications": "\n".join(body.decode() for body in Echo.received),
        "logs": "\n".join(
            f"{r.getMessage()} {r.exc_text or ''} {r.args!r}" for r in caplog.records
        ),
        **cli_outputs(config, db_url, echo, capsys),
    }
    evidence_that_it_was_all_exercised(outputs)
    leaks = {name: excerpt(text) for name, text in outputs.items() if SECRET in text}
    assert not leaks, f"the secret leaked into {sorted(leaks)}: {leaks}"
    assert not failed, f"routes failed: {failed}"


def writes(client: httpx.Client) -> None:
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    firing = client.get("/api/v1/alerts", params={"state": "firing"}).json()["items"]
    silence = {"matchers": [{"name": "target", "value": "late"}], "duration": "1h"}
    made = client.post("/api/v1/silences", json=silence | {"createdBy": "me"}, headers=bearer)
    assert made.status_code == 201
    ack = client.post(
        f"/api/v1/alerts/{firing[0]['id']}/acknowledge", json={"by": "me"}, headers=bearer
    )
    assert ack.status_code == 200


def cli_outputs(
    config: Path, db_url: str, echo: str, capsys: pytest.CaptureFixture[str]
) -> dict[str, str]:
    capsys.readouterr()
    found = {}
    code, out, err = run_cli(["export", "--database-url", db_url], capsys)
    assert code == 0
    found["csv export"] = out + err
    code, out, err = run_cli(["check-config", str(config)], capsys)
    assert code == 0
    found["check-config"] = out + err
    broken = config.with_name("broken.yaml")
    broken.write_text(config.read_text().replace("samples: 3", "samples: 0"))
    code, out, err = run_cli(["check-config", str(broken)], capsys)
    assert code == 1
    found["check-config of a broken file"] = out + err
    newline = config.with_name("newline.yaml")
    newline.write_text(config.read_text().replace("PW_PLANTED_KEY}", "PW_PLANTED_KEY_NL}"))
    code, out, err = run_cli(["check-config", str(newline)], capsys)
    assert code == 1 and "headers: Authorization: the value has a control character" in err
    found["check-config of a secret with a newline"] = out + err
    for key in ("PW_PLANTED_KEY", "PW_PLANTED_KEY_NL"):
        header = f"Authorization: Bearer ${{{key}}}"
        probe = ["probe", f"{echo}/v1", "--samples", "2", "--header", header]
        for extra in ([], ["--json"]):
            code, out, err = run_cli([*probe, *extra], capsys)
            # Run and every sample refused (1: no sample succeeded), or not run at all (2).
            assert code == (1 if key == "PW_PLANTED_KEY" else 2), out + err
            found[f"probe {key} {' '.join(extra)}"] = out + err
    return found


def evidence_that_it_was_all_exercised(outputs: dict[str, str]) -> None:
    """The test proves something only if the failures, alerts and pages really happened."""
    responses, database = outputs["responses"], outputs["database"]
    assert "Incorrect API key provided" in database  # the echo was stored, scrubbed
    assert "ConnectError" in database and "HTTP404" in database and "HTTP401" in database
    assert "deadline_exceeded" in database
    assert "probe_failing" in responses and "/api/v1/alerts/" in responses
    assert "phasewatch_phase_seconds_bucket" in responses  # /metrics
    assert '"openapi"' in responses and "swagger" in responses.lower()  # /docs
    assert "probe failing on echoing" in outputs["notifications"]
    assert outputs["csv export"].count("\n") > 20
    assert "ok: 5 target(s)" in outputs["check-config"]
    assert "HTTP401" in outputs["probe PW_PLANTED_KEY --json"]
    assert "control character" in outputs["probe PW_PLANTED_KEY_NL "]
    assert any("probe of" in line or "run" in line for line in outputs["logs"].splitlines())


def excerpt(text: str) -> str:
    at = text.find(SECRET)
    return text[max(0, at - 200) : at + len(SECRET) + 50]


def test_fill_uses_every_real_id() -> None:
    ids = {"alert_id": ["a1", "a2"], "name": ["t"]}
    assert fill("/alerts/{alert_id}", ids) == ["/alerts/a1", "/alerts/a2"]
    assert fill("/targets/{name:path}/history", ids) == ["/targets/t/history"]
    with pytest.raises(AssertionError, match="no ids for"):
        fill("/things/{thing_id}", ids)


@pytest.mark.parametrize(
    ("text", "headers", "expected"),
    [
        (
            "401: bad key sk-abcdefgh12",
            {"Authorization": "Bearer sk-abcdefgh12"},
            "401: bad key <redacted>",
        ),
        (
            "Illegal header value b'Bearer sk-abcdefgh12\\n'",
            {"a": "Bearer sk-abcdefgh12"},
            "Illegal header value b'<redacted>\\n'",
        ),  # fmt: skip
        (
            "key=abcdefgh12 and abcdefgh12",
            {"x-api-key": "abcdefgh12"},
            "key=<redacted> and <redacted>",
        ),
        ("Bearer realm", {"Authorization": "Bearer short"}, "Bearer realm"),  # words, not secrets
        ("no secret here", {"x-api-key": "abcdefgh12"}, "no secret here"),
        ("echoed ABCDEFGH12 upper", {"x-api-key": "abcdefgh12"}, "echoed <redacted> upper"),
        # The start of a key at the very end: somebody cut the text inside the key.
        ("cut at abcdefg", {"x-api-key": "abcdefgh12"}, "cut at <redacted>"),
        ("ends abc", {"x-api-key": "abcdefgh12"}, "ends abc"),  # too short to tell
        ("inner abcdefg, then more", {"x-api-key": "abcdefgh12"}, "inner abcdefg, then more"),
        (None, {"x-api-key": "abcdefgh12"}, None),
        ("", {"x-api-key": "abcdefgh12"}, ""),
    ],
)
def test_header_values_are_scrubbed_from_error_text(
    text: str | None, headers: dict[str, str], expected: str | None
) -> None:
    assert scrub_secrets(text, headers) == expected


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("x" * 6 + "abcdefgh12" + "y" * 4, 10, "xxxxxx<red"),  # scrubbed, then cut
        ("x" * 6 + "abcdefgh12", 12, "xxxxxx<redac"),
        ("x" * 6 + "abcd?? more", 10, "xxxxxx<red"),  # a cut that leaves a key's start
        ("x" * 6 + "abc" + "y" * 9, 9, "xxxxxxabc"),
        ("short", 10, "short"),
    ],
)
def test_a_cut_keeps_no_start_of_a_secret(text: str, limit: int, expected: str) -> None:
    assert Redactor.of({"x-api-key": "abcdefgh12"}).cut(text, limit) == expected


@pytest.mark.parametrize(
    ("value", "bad"),
    [
        ("Bearer x", False),
        ("a\tb", False),
        ("é", False),
        ("x\n", True),
        ("x\r", True),
        ("\x00", True),
        ("\x7f", True),
    ],  # fmt: skip
)
def test_control_characters_in_header_values(value: str, bad: bool) -> None:
    assert has_control_character(value) is bad
