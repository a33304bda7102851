"""At least once, and each repeat recognisable: a receiver slower than the timeout, or a
sender stopped mid-send, hears a transition twice, both times with the same idempotency key;
other transitions and other notifiers carry other keys. Real loopback receivers, both
databases."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.orm import Session, sessionmaker

from app.alerts.sender import Sender
from app.alerts.state import State
from app.notifiers.webhook import Webhook, WebhookConfig
from tests.alertmanager import HANG, Outbox, Received, Receiver, identity, receiving, wait_until

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


def hook(name: str, url: str, timeout: float = 5.0) -> Webhook:
    config = WebhookConfig.model_validate({"type": "webhook", "url": url, "timeout": timeout})
    return Webhook(name, config)


def key(request: Received) -> str:
    header = request.headers["Idempotency-Key"]
    assert request.body["idempotencyKey"] == header  # the body says what the header says
    return header


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC) + timedelta(seconds=1)

    def __call__(self) -> datetime:
        return self.now


async def test_a_receiver_slower_than_the_timeout_hears_the_repeat_with_the_same_key(
    sessions: sessionmaker[Session],
) -> None:
    outbox, clock = Outbox(sessions), Clock()
    with receiving(Receiver(delay_s=2.0)) as receiver:
        sender = Sender(sessions, {"ops": hook("ops", receiver.url, timeout=0.5)}, clock=clock)
        _, row_id = outbox.fire(identity(), "ops")
        assert await sender.run_once() == 1
        assert outbox.row(row_id).status == "pending"  # timed out, to be tried again
        receiver.delay_s = 0.0
        clock.now += timedelta(minutes=1)
        assert await sender.run_once() == 1
    assert outbox.row(row_id).status == "sent"
    first, repeat = receiver.received  # the slow receiver did get the first one
    assert first.body == repeat.body
    assert key(first) == key(repeat)


async def test_a_send_cut_by_a_stop_is_repeated_after_the_restart_with_the_same_key(
    sessions: sessionmaker[Session],
) -> None:
    outbox = Outbox(sessions)
    with receiving(Receiver(script=[HANG])) as receiver:
        _, row_id = outbox.fire(identity(), "ops")
        stopping = Sender(sessions, {"ops": hook("ops", receiver.url)})
        sending = asyncio.create_task(stopping.run_once())
        await asyncio.to_thread(wait_until, lambda: receiver.received, "the first send")
        stopping.stop()  # what SIGTERM does to the sender
        assert await sending == 0
        assert outbox.row(row_id).status == "pending"
        restarted = Sender(sessions, {"ops": hook("ops", receiver.url)})
        assert await restarted.run_once() == 1
    first, repeat = receiver.received
    assert key(first) == key(repeat)


async def test_each_transition_and_each_notifier_has_a_key_of_its_own(
    sessions: sessionmaker[Session],
) -> None:
    outbox = Outbox(sessions)
    with receiving() as receiver:
        notifiers = {name: hook(name, f"{receiver.url}/{name}") for name in ("ops", "pager")}
        who = identity()
        alert_id = outbox.alert(who, datetime.now(UTC))
        for state, previous in ((State.FIRING, State.PENDING), (State.RESOLVED, State.FIRING)):
            for name in notifiers:
                outbox.deliver(alert_id, who, name, state, previous)
        assert await Sender(sessions, notifiers).run_once() == 4
    keys = {(r.path, r.body["status"]): key(r) for r in receiver.received}
    assert set(keys) == {(p, s) for p in ("/ops", "/pager") for s in ("firing", "resolved")}
    assert len(set(keys.values())) == 4
