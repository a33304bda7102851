"""Alertmanager push, against a real Alertmanager: what it holds is read back from its API,
and what it then sends is caught by a real loopback receiver."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from app.alerts.sender import Sender
from app.alerts.state import State
from app.notifiers.alertmanager import Alertmanager, AlertmanagerConfig
from app.notifiers.base import Delivery, fingerprint, parse_time
from app.notifiers.webhook import message
from tests.alertmanager import (
    Alertmanager as AlertmanagerProcess,
)
from tests.alertmanager import (
    Outbox,
    Receiver,
    identity,
    payload,
    receiving,
    running_alertmanager,
    wait_until,
)

pytestmark = [pytest.mark.process, pytest.mark.anyio, pytest.mark.timeout(60)]
FIRING, RESOLVED = State.FIRING, State.RESOLVED


@pytest.fixture(scope="module")
def recorder() -> Iterator[Receiver]:
    with receiving() as receiver:
        yield receiver


@pytest.fixture(scope="module")
def alertmanager(
    recorder: Receiver, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AlertmanagerProcess]:
    workdir = tmp_path_factory.mktemp("alertmanager")
    with running_alertmanager(workdir, f"{recorder.url}/am") as process:
        yield process


def push(url: str, **extra: Any) -> Alertmanager:
    config = AlertmanagerConfig.model_validate({"type": "alertmanager", "url": url} | extra)
    return Alertmanager("am", config)


def ms(moment: datetime) -> datetime:
    """Alertmanager keeps times to the millisecond, as phasewatch sends them."""
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def for_target(bodies: list[Any], target: str) -> list[dict[str, Any]]:
    return [body for body in bodies if body["commonLabels"].get("target") == target]


async def test_alertmanager_holds_a_firing_alert_extends_it_on_refresh_and_drops_it_resolved(
    sessions: sessionmaker[Session], alertmanager: AlertmanagerProcess, recorder: Receiver
) -> None:
    target = f"am-{uuid.uuid4().hex[:8]}"
    who, outbox = identity(target), Outbox(sessions)
    sender = Sender(sessions, {"am": push(alertmanager.url)})
    fired = datetime.now(UTC) - timedelta(minutes=2)
    alert_id, _ = outbox.fire(who, "am", at=fired)

    assert await sender.run_once() == 1
    [held] = alertmanager.alerts(target=target)
    assert held["labels"] == who.labels()
    assert held["annotations"]["summary"].startswith(f"dominant phase moved on {target}")
    assert "lead_pp=20.25" in held["annotations"]["description"]
    assert held["status"]["state"] == "active"
    assert held["fingerprint"] == fingerprint(who.labels())
    assert parse_time(held["startsAt"]) == ms(fired)
    first_end = parse_time(held["endsAt"])
    assert first_end > datetime.now(UTC) + timedelta(minutes=50)

    now = datetime.now(UTC)
    outbox.deliver(alert_id, who, "am", FIRING, FIRING, at=now, ends_in_s=7200)
    assert await sender.run_once() == 1
    [held] = alertmanager.alerts(target=target)
    assert parse_time(held["endsAt"]) == ms(now + timedelta(seconds=7200)) > first_end
    assert parse_time(held["startsAt"]) == ms(fired)  # when it fired, not when refreshed

    outbox.deliver(alert_id, who, "am", RESOLVED, FIRING, at=datetime.now(UTC))
    assert await sender.run_once() == 1
    assert alertmanager.alerts(target=target) == []

    def told_resolved() -> list[dict[str, Any]] | None:
        told = for_target(recorder.bodies("/am"), target)
        return told if told and told[-1]["status"] == "resolved" else None

    told = wait_until(told_resolved, "Alertmanager's webhook says resolved")
    assert [body["status"] for body in told] == ["firing", "resolved"]


async def test_the_generic_webhook_sends_exactly_what_alertmanager_sends(
    sessions: sessionmaker[Session], alertmanager: AlertmanagerProcess, recorder: Receiver
) -> None:
    target = f"shape-{uuid.uuid4().hex[:8]}"
    who, outbox = identity(target, vantage=None), Outbox(sessions)
    sender = Sender(sessions, {"am": push(alertmanager.url)})
    alert_id, firing_id = outbox.fire(who, "am", at=datetime.now(UTC) - timedelta(seconds=30))
    assert await sender.run_once() == 1
    wait_until(lambda: for_target(recorder.bodies("/am"), target), "the firing notification")
    resolved_id = outbox.deliver(alert_id, who, "am", RESOLVED, FIRING, at=datetime.now(UTC))
    assert await sender.run_once() == 1

    def told() -> list[dict[str, Any]] | None:
        bodies = for_target(recorder.bodies("/am"), target)
        return bodies if len(bodies) == 2 else None

    firing, resolved = wait_until(told, "the resolved notification")
    for theirs, row_id in ((firing, firing_id), (resolved, resolved_id)):
        row = outbox.row(row_id)
        fired_at = parse_time(firing["alerts"][0]["startsAt"])
        ours = message("recorder", Delivery(row.id, "am", row.payload, fired_at), None)
        # Alertmanager fills in its own address; phasewatch its external_url, if set; and
        # the idempotency key is phasewatch's own field.
        assert ours == theirs | {"externalURL": "", "idempotencyKey": ours["idempotencyKey"]}


async def test_alertmanager_refusing_an_alert_fails_the_row_with_its_reason(
    sessions: sessionmaker[Session], alertmanager: AlertmanagerProcess
) -> None:
    who, outbox = identity(f"bad-{uuid.uuid4().hex[:8]}"), Outbox(sessions)
    alert_id = outbox.alert(who, datetime.now(UTC))
    bad_labels = who.labels() | {"not a label name": "x"}
    row_id = outbox.deliver(alert_id, who, "am", FIRING, State.PENDING, labels=bad_labels)
    assert await Sender(sessions, {"am": push(alertmanager.url)}).run_once() == 1
    row = outbox.row(row_id)
    assert (row.status, row.attempts) == ("failed", 1)
    assert row.last_error is not None and "HTTP 400" in row.last_error


async def test_push_goes_to_api_v2_alerts_under_a_path_with_basic_auth_and_headers() -> None:
    secret = "pa55-" + uuid.uuid4().hex
    with receiving() as receiver:
        config = {
            "basic_auth": {"username": "phasewatch", "password": secret},
            "headers": {"X-Scope-OrgID": "tenant-1"},
        }
        notifier = push(f"{receiver.url}/alertmanager/", **config)
        who = identity()
        now = datetime.now(UTC)
        body = payload(who, FIRING, State.PENDING, now)
        delivery = Delivery(7, "am", body, fired_at=now - timedelta(minutes=5))
        await notifier.notify(delivery)
    [request] = receiver.received
    assert request.path == "/alertmanager/api/v2/alerts"
    expected = base64.b64encode(f"phasewatch:{secret}".encode()).decode()
    assert request.headers["Authorization"] == f"Basic {expected}"
    assert request.headers["X-Scope-OrgID"] == "tenant-1"
    assert request.headers["Idempotency-Key"] == delivery.idempotency_key
    [alert] = request.body
    assert set(alert) == {"labels", "annotations", "startsAt", "endsAt"}
    assert alert["labels"] == who.labels()
    assert all(isinstance(value, str) for value in alert["labels"].values())
    assert secret not in repr(notifier.config) and secret not in notifier.config.model_dump_json()
