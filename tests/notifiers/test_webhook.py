"""Generic webhook, against a real loopback receiver: its JSON, its config, and how the
outbox treats a receiver that fails, refuses, or never answers."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from app.alerts.sender import Backoff, Sender
from app.alerts.state import State
from app.config import ConfigError, load_targets
from app.notifiers import build_notifiers
from app.notifiers.base import Delivery, fingerprint
from app.notifiers.webhook import Webhook, WebhookConfig, group_key, message
from tests.alertmanager import HANG, Outbox, Receiver, identity, payload, receiving

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]
TOKEN = "tok-" + uuid.uuid4().hex


def hook(url: str, timeout: float = 5.0) -> Webhook:
    config = WebhookConfig.model_validate({"type": "webhook", "url": url, "timeout": timeout})
    return Webhook("ops", config)


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC) + timedelta(seconds=1)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


# --- Config -------------------------------------------------------------------------------

TARGETS_FILE = """\
notifiers:
  ops:
    type: webhook
    url: ${HOOK_URL}
    headers:
      Authorization: Bearer ${HOOK_TOKEN}
    timeout: 3
targets:
  - name: api
    url: http://127.0.0.1:1/
    notifiers: [ops]
"""


def test_webhook_config_takes_url_and_headers_from_the_environment_and_never_shows_them(
    tmp_path: Path,
) -> None:
    path = tmp_path / "phasewatch.yaml"
    path.write_text(TARGETS_FILE)
    url = f"https://hooks.example/in/{TOKEN}"
    parsed = load_targets(path, {"HOOK_URL": url, "HOOK_TOKEN": TOKEN})
    config = parsed.notifiers["ops"]
    assert isinstance(config, WebhookConfig)
    assert config.url.get_secret_value() == url
    assert config.headers["Authorization"].get_secret_value() == f"Bearer {TOKEN}"
    assert config.timeout == 3
    for shown in (repr(parsed), str(config), parsed.model_dump_json()):
        assert TOKEN not in shown
    assert [type(n) for n in build_notifiers(parsed.notifiers).values()] == [Webhook]


@pytest.mark.parametrize(
    ("environ", "edit", "expected"),
    [
        (
            {"HOOK_TOKEN": "x"},
            ("", ""),
            "phasewatch.yaml:4: notifiers.ops.url: environment variable HOOK_URL is not set",
        ),
        (
            {"HOOK_URL": "ftp://x/", "HOOK_TOKEN": "x"},
            ("", ""),
            "phasewatch.yaml:4: notifiers.ops.url: must be an http:// or https:// URL",
        ),
        (
            {"HOOK_URL": f"http://x:99999/{TOKEN}", "HOOK_TOKEN": "x"},
            ("", ""),
            "phasewatch.yaml:4: notifiers.ops.url: has a port that is not a number from 1 to 65535",
        ),
        (
            {"HOOK_URL": "http://x/", "HOOK_TOKEN": "x"},
            ("type: webhook", "type: pager"),
            "phasewatch.yaml:2: notifiers.ops: type must be one of:"
            " webhook, slack, alertmanager, pagerduty, email",
        ),
        (
            {"HOOK_URL": "http://x/", "HOOK_TOKEN": "x"},
            ("timeout: 3", "timeout: 0"),
            "phasewatch.yaml:7: notifiers.ops.timeout: Input should be greater than 0",
        ),
        (
            {"HOOK_URL": "http://x/", "HOOK_TOKEN": "x"},
            ("notifiers: [ops]", "notifiers: [ops, pager]"),
            "phasewatch.yaml:11: targets[api].notifiers.1: no notifier 'pager';"
            " notifiers defined: ops",
        ),
    ],
)
def test_notifier_config_errors_name_the_file_line_field_and_reason(
    tmp_path: Path, environ: dict[str, str], edit: tuple[str, str], expected: str
) -> None:
    path = tmp_path / "phasewatch.yaml"
    path.write_text(TARGETS_FILE.replace(*edit))
    with pytest.raises(ConfigError) as caught:
        load_targets(path, environ)
    assert caught.value.problems == [f"{tmp_path}/{expected}"]


# --- The message --------------------------------------------------------------------------


async def test_webhook_posts_alertmanagers_version_4_json_with_the_configured_headers() -> None:
    who = identity()
    at = datetime(2026, 11, 3, 9, 30, 15, 250000, tzinfo=UTC)
    delivery = Delivery(1, "ops", payload(who, State.FIRING, State.PENDING, at), at)
    with receiving() as receiver:
        config = WebhookConfig.model_validate(
            {
                "type": "webhook",
                "url": f"{receiver.url}/hook",
                "headers": {"Authorization": f"Bearer {TOKEN}"},
                "external_url": "https://phasewatch.example",
            }
        )
        await Webhook("ops", config).notify(delivery)
    [request] = receiver.received
    assert request.path == "/hook"
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["Idempotency-Key"] == delivery.idempotency_key
    labels = who.labels()
    annotations = {
        "summary": "dominant phase moved on translate-prod: generation 71.5 % → network 44 %",
        "description": "from_share_pct=71.5, lead_pp=20.25, runs=4, to_share_pct=44",
    }
    assert request.body == {
        "version": "4",
        "groupKey": group_key(labels),
        "truncatedAlerts": 0,
        "status": "firing",
        "receiver": "ops",
        "groupLabels": labels,
        "commonLabels": labels,
        "commonAnnotations": annotations,
        "externalURL": "https://phasewatch.example",
        "idempotencyKey": delivery.idempotency_key,
        "alerts": [
            {
                "status": "firing",
                "labels": labels,
                "annotations": annotations,
                "startsAt": "2026-11-03T09:30:15.25Z",
                "endsAt": "0001-01-01T00:00:00Z",
                "generatorURL": "https://phasewatch.example",
                "fingerprint": fingerprint(labels),
            }
        ],
    }


def test_a_resolved_message_ends_when_the_alert_resolved() -> None:
    who = identity(vantage=None)
    fired = datetime(2026, 11, 3, 9, 0, tzinfo=UTC)
    resolved = fired + timedelta(hours=2)
    body = payload(who, State.RESOLVED, State.FIRING, resolved)
    sent = message("ops", Delivery(2, "ops", body, fired_at=fired))
    [alert] = sent["alerts"]
    assert sent["status"] == alert["status"] == "resolved"
    assert (alert["startsAt"], alert["endsAt"]) == ("2026-11-03T09:00:00Z", "2026-11-03T11:00:00Z")
    assert "vantage" not in alert["labels"]  # a service-wide alert has no vantage label
    assert sent["groupKey"] == (
        '{}:{alertname="dominant_shift", from_phase="generation", scope="path",'
        ' severity="critical", target="translate-prod", to_phase="network"}'
    )


def test_labels_never_carry_numbers_even_when_a_payload_offers_them() -> None:
    body = payload(identity(), State.FIRING, State.PENDING, datetime.now(UTC))
    body["labels"] = body["labels"] | {"lead_pp": 20.25, "runs": 4}
    [alert] = message("ops", Delivery(3, "ops", body))["alerts"]
    assert alert["labels"] == identity().labels()


# --- Through the outbox -------------------------------------------------------------------


async def test_a_failing_receiver_is_retried_with_backoff_until_it_accepts(
    sessions: sessionmaker[Session],
) -> None:
    outbox, clock = Outbox(sessions), Clock()
    with receiving(Receiver(script=[500, 503])) as receiver:
        sender = Sender(sessions, {"ops": hook(f"{receiver.url}/hook")}, clock=clock)
        _, row_id = outbox.fire(identity(), "ops")

        assert await sender.run_once() == 1
        row = outbox.row(row_id)
        assert (row.status, row.attempts) == ("pending", 1)
        assert row.last_error is not None and "HTTP 500" in row.last_error
        assert 4.0 <= (row.next_attempt_at - clock.now).total_seconds() <= 6.0
        assert await sender.run_once() == 0  # not due yet

        clock.advance(6)
        assert await sender.run_once() == 1
        row = outbox.row(row_id)
        assert (row.status, row.attempts) == ("pending", 2)
        assert row.last_error is not None and "HTTP 503" in row.last_error
        assert 8.0 <= (row.next_attempt_at - clock.now).total_seconds() <= 12.0

        clock.advance(12)
        assert await sender.run_once() == 1
    row = outbox.row(row_id)
    assert (row.status, row.attempts, row.sent_at) == ("sent", 3, clock.now)
    assert len(receiver.received) == 3


async def test_a_4xx_fails_at_once_with_the_answer_in_last_error_but_no_secret(
    sessions: sessionmaker[Session],
) -> None:
    outbox = Outbox(sessions)
    with receiving(Receiver(script=[404])) as receiver:
        sender = Sender(sessions, {"ops": hook(f"{receiver.url}/in/{TOKEN}?key={TOKEN}")})
        _, row_id = outbox.fire(identity(), "ops")
        assert await sender.run_once() == 1
        assert await sender.run_once() == 0
    row = outbox.row(row_id)
    assert (row.status, row.attempts, row.sent_at) == ("failed", 1, None)
    assert row.last_error is not None
    assert row.last_error.startswith(f"http://127.0.0.1:{receiver.port}: HTTP 404: answer 404")
    assert TOKEN not in row.last_error  # the receiver echoed the path; it is scrubbed
    assert len(receiver.received) == 1


async def test_a_receiver_that_never_answers_times_out_and_is_retried(
    sessions: sessionmaker[Session],
) -> None:
    outbox, clock = Outbox(sessions), Clock()
    with receiving(Receiver(script=[HANG])) as receiver:
        sender = Sender(sessions, {"ops": hook(f"{receiver.url}/hook", timeout=0.5)}, clock=clock)
        _, row_id = outbox.fire(identity(), "ops")
        # The receiver never answers: only the hook's 0.5 s timeout ends the send.
        assert await asyncio.wait_for(sender.run_once(), 20) == 1
        row = outbox.row(row_id)
        assert (row.status, row.attempts) == ("pending", 1)
        assert row.last_error == f"http://127.0.0.1:{receiver.port}: no answer within 0.5 s"
        clock.advance(10)
        assert await sender.run_once() == 1
    assert outbox.row(row_id).status == "sent"
    assert len(receiver.received) == 2


async def test_a_refused_connection_is_retried(
    sessions: sessionmaker[Session], refused_port: int
) -> None:
    url = f"http://127.0.0.1:{refused_port}/hook"
    outbox = Outbox(sessions)
    _, row_id = outbox.fire(identity(), "ops")
    sender = Sender(sessions, {"ops": hook(url)}, backoff=Backoff(base_s=60))
    assert await sender.run_once() == 1
    row = outbox.row(row_id)
    assert (row.status, row.attempts) == ("pending", 1)
    assert row.last_error is not None and "ConnectError" in row.last_error


async def test_each_row_is_sent_once_across_a_restart_of_the_sender(db_url: str) -> None:
    from app.store.db import make_engine, make_sessions

    with receiving() as receiver:
        first = make_engine(db_url)
        outbox = Outbox(make_sessions(first))
        rows = [outbox.fire(identity(f"api-{n}"), "ops")[1] for n in range(3)]
        assert await Sender(make_sessions(first), {"ops": hook(receiver.url)}).run_once() == 3
        first.dispose()  # the process ends

        second = make_engine(db_url)  # and another starts
        sender = Sender(make_sessions(second), {"ops": hook(receiver.url)})
        assert [await sender.run_once(), await sender.run_once()] == [0, 0]
        assert {Outbox(make_sessions(second)).row(row).status for row in rows} == {"sent"}
        second.dispose()
    targets = [body["commonLabels"]["target"] for body in receiver.bodies()]
    assert sorted(targets) == ["api-0", "api-1", "api-2"]


def test_a_payload_time_without_a_zone_is_read_as_utc() -> None:
    body = payload(identity(), State.FIRING, State.PENDING, datetime(2026, 1, 1, tzinfo=UTC))
    body["at"] = "2026-01-01T00:00:00"
    assert Delivery(4, "ops", body).at == datetime(2026, 1, 1, tzinfo=UTC)
