"""The outbox sender on real databases: backoff, giving up, order within an alert, the
at-least-once window, shutdown, several senders on PostgreSQL, and the service's loop."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select, update
from sqlalchemy.orm import Session, sessionmaker

from app.alerts import sender as sender_module
from app.alerts.sender import Backoff, Sender
from app.alerts.state import State
from app.config import Settings, load_targets
from app.main import build_service
from app.notifiers.base import Delivery, Notifier
from app.notifiers.webhook import Webhook, WebhookConfig
from app.runtime import upkeep
from app.runtime.upkeep import Upkeep
from app.store import wakeups
from app.store.db import make_engine, make_sessions
from app.store.models import DeliveryRow
from app.store.quarantine import Quarantine
from app.store.wakeups import Listener
from tests.alertmanager import HANG, Outbox, Receiver, identity, receiving, wait_until
from tests.alerts.test_engine import NOTIFIERS, Watch

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


def hook(url: str, timeout: float = 5.0) -> Webhook:
    config = WebhookConfig.model_validate({"type": "webhook", "url": url, "timeout": timeout})
    return Webhook("ops", config)


def targets_of(receiver: Receiver) -> list[str]:
    return [body["commonLabels"]["target"] for body in receiver.bodies()]


def test_backoff_doubles_from_five_seconds_with_jitter_and_stops_at_ten_minutes() -> None:
    backoff, rng = Backoff(), random.Random(7)
    for failures, nominal in [(1, 5), (2, 10), (3, 20), (4, 40), (7, 320)]:
        delays = [backoff.delay_s(failures, rng) for _ in range(200)]
        assert nominal * 0.8 <= min(delays) < max(delays) <= nominal * 1.2
    assert {backoff.delay_s(n, rng) <= 600 for n in (8, 9, 50, 10_000)} == {True}


async def test_a_row_still_failing_a_day_after_it_was_written_fails_for_good(
    sessions: sessionmaker[Session],
) -> None:
    outbox = Outbox(sessions)
    written = datetime.now(UTC) - timedelta(hours=23, minutes=59, seconds=57)
    who = identity()
    alert_id = outbox.alert(who, written)
    row_id = outbox.deliver(alert_id, who, "ops", State.FIRING, State.PENDING, at=written)
    with receiving(Receiver(script=[502])) as receiver:
        assert await Sender(sessions, {"ops": hook(receiver.url)}).run_once() == 1
    row = outbox.row(row_id)
    assert (row.status, row.attempts) == ("failed", 1)
    assert row.last_error is not None
    assert row.last_error.startswith("gave up after 1 attempts: http://127.0.0.1:")
    assert "HTTP 502" in row.last_error


async def test_rows_of_one_alert_wait_behind_its_retry_while_other_alerts_go_out(
    sessions: sessionmaker[Session],
) -> None:
    outbox = Outbox(sessions)
    now = datetime.now(UTC)
    clock = [now + timedelta(seconds=1)]
    with receiving(Receiver(script=[503])) as receiver:
        sender = Sender(sessions, {"ops": hook(receiver.url)}, clock=lambda: clock[0])
        slow = identity("slow")
        alert_id, fired = outbox.fire(slow, "ops", at=now)
        resolved = outbox.deliver(alert_id, slow, "ops", State.RESOLVED, State.FIRING, at=now)
        _, other = outbox.fire(identity("other"), "ops", at=now)

        assert await sender.run_once() == 2  # slow's firing fails; other goes; resolved waits
        assert [outbox.row(r).status for r in (fired, resolved, other)] == [
            "pending",
            "pending",
            "sent",
        ]
        assert outbox.row(resolved).attempts == 0
        clock[0] += timedelta(seconds=10)
        assert await sender.run_once() == 2
    assert targets_of(receiver) == ["slow", "other", "slow", "slow"]
    assert [body["status"] for body in receiver.bodies()][2:] == ["firing", "resolved"]


async def test_a_row_that_is_no_delivery_is_set_aside_once_and_the_others_go_out(
    sessions: sessionmaker[Session],
) -> None:
    outbox = Outbox(sessions)
    _, bad = outbox.fire(identity("bad"), "ops")
    _, good = outbox.fire(identity("good"), "ops")
    with sessions.begin() as session:  # planted past the engine, as SQL would
        session.execute(update(DeliveryRow).where(DeliveryRow.id == bad).values(payload="oops"))
    quarantine = Quarantine()
    with receiving(Receiver()) as receiver:
        sender = Sender(sessions, {"ops": hook(receiver.url)}, aside=quarantine.loop("outbox"))
        assert await sender.run_once() == 2  # the bad row set aside, then the good one sent
        assert await sender.run_once() == 0  # passed over: not claimed again
    assert targets_of(receiver) == ["good"]
    assert (outbox.row(bad).status, outbox.row(good).status) == ("pending", "sent")
    assert quarantine.problems() == [
        f"outbox: 1 delivery quarantined: delivery {bad}: its payload is 'oops', not an object"
    ]


async def test_a_crash_after_the_receiver_accepted_but_before_the_commit_sends_once_more(
    sessions: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The documented at-least-once window: one row, between its send and its COMMIT."""
    outbox = Outbox(sessions)
    _, row_id = outbox.fire(identity(), "ops")
    record = sender_module.record

    def crash(*args: Any, **kwargs: Any) -> str:
        raise ConnectionError("the database went away")

    with receiving() as receiver:
        sender = Sender(sessions, {"ops": hook(receiver.url)})
        monkeypatch.setattr(sender_module, "record", crash)
        with pytest.raises(ConnectionError):
            await sender.run_once()
        assert outbox.row(row_id).status == "pending"
        monkeypatch.setattr(sender_module, "record", record)
        assert await sender.run_once() == 1
        assert await sender.run_once() == 0
    assert outbox.row(row_id).status == "sent"
    assert len(receiver.received) == 2


class Broken(Notifier[WebhookConfig]):
    async def notify(self, delivery: Delivery) -> None:
        raise KeyError("summary")


async def test_a_notifier_that_cannot_build_its_message_fails_the_row(
    sessions: sessionmaker[Session],
) -> None:
    outbox = Outbox(sessions)
    _, row_id = outbox.fire(identity(), "ops")
    notifier = Broken("ops", hook("http://127.0.0.1:9/").config)
    assert await Sender(sessions, {"ops": notifier}).run_once() == 1
    row = outbox.row(row_id)
    assert (row.status, row.last_error) == (
        "failed",
        "phasewatch could not build the notification: KeyError('summary')",
    )


async def test_a_row_for_a_notifier_no_longer_defined_waits_and_says_why(
    sessions: sessionmaker[Session],
) -> None:
    outbox = Outbox(sessions)
    _, row_id = outbox.fire(identity(), "gone")
    assert await Sender(sessions, {}).run_once() == 1
    row = outbox.row(row_id)
    assert (row.status, row.attempts) == ("pending", 1)
    assert row.last_error == "no notifier named 'gone' in the targets file"


async def test_stop_drops_a_send_in_flight_and_leaves_its_row_pending(
    sessions: sessionmaker[Session],
) -> None:
    outbox = Outbox(sessions)
    _, row_id = outbox.fire(identity(), "ops")
    with receiving(Receiver(script=[HANG])) as receiver:
        sender = Sender(sessions, {"ops": hook(receiver.url, timeout=30)})
        running = asyncio.create_task(sender.run_once())
        await asyncio.to_thread(receiver.wait_for, lambda bodies: len(bodies) == 1)
        sender.stop()
        # Done long before the hook's own 30 s timeout could have ended the send.
        assert await asyncio.wait_for(running, 20) == 0
    row = outbox.row(row_id)
    assert (row.status, row.attempts, row.last_error) == ("pending", 0, None)


async def test_a_send_in_flight_holds_up_no_writer(sessions: sessionmaker[Session]) -> None:
    """PostgreSQL locks only the row being sent; SQLite takes no write lock until the send
    is over. Either way the pipeline and the engine keep writing while a receiver hangs."""
    outbox = Outbox(sessions)
    _, row_id = outbox.fire(identity("hanging"), "ops")
    with receiving(Receiver(script=[HANG])) as receiver:
        sender = Sender(sessions, {"ops": hook(receiver.url, timeout=30)})
        running = asyncio.create_task(sender.run_once())
        await asyncio.to_thread(receiver.wait_for, lambda bodies: len(bodies) == 1)
        try:
            write = asyncio.to_thread(outbox.fire, identity("meanwhile"), "ops")
            _, other = await asyncio.wait_for(write, 3)
        finally:
            sender.stop()
            await asyncio.wait_for(running, 5)
    assert [outbox.row(row).status for row in (row_id, other)] == ["pending", "pending"]


# --- Several senders --------------------------------------------------------------------


@pytest.fixture
def two_engines(postgres_url: str) -> Iterator[list[Engine]]:
    engines = [make_engine(postgres_url) for _ in range(2)]
    yield engines
    for engine in engines:
        engine.dispose()


@pytest.mark.postgres
async def test_two_senders_on_postgresql_send_each_row_exactly_once(
    two_engines: list[Engine],
) -> None:
    outbox = Outbox(make_sessions(two_engines[0]))
    rows = [outbox.fire(identity(f"api-{n:02}"), "ops")[1] for n in range(30)]
    with receiving(Receiver(delay_s=0.02)) as receiver:
        senders = [
            Sender(make_sessions(engine), {"ops": hook(receiver.url)}, batch=100)
            for engine in two_engines
        ]
        handled = await asyncio.gather(*(sender.run_once() for sender in senders))
        assert [await sender.run_once() for sender in senders] == [0, 0]
    assert sum(handled) == 30 and min(handled) > 0, handled  # both sent, none twice
    assert sorted(targets_of(receiver)) == [f"api-{n:02}" for n in range(30)]
    assert {outbox.row(row).status for row in rows} == {"sent"}


# --- The service ----------------------------------------------------------------------------


async def test_the_service_sends_the_outbox_in_the_background(db_url: str, tmp_path: Path) -> None:
    with receiving() as receiver:
        path = tmp_path / "phasewatch.yaml"
        path.write_text(f"notifiers:\n  ops: {{type: webhook, url: '{receiver.url}/hook'}}\n")
        settings = Settings(config=path, database_url=db_url, spool_dir=tmp_path / "spool")
        service = build_service(settings, load_targets(path))
        outbox = Outbox(service.sessions)
        _, row_id = outbox.fire(identity(), "ops")
        await service.start()
        try:
            await asyncio.to_thread(receiver.wait_for, lambda bodies: len(bodies) == 1)
            sent = await asyncio.to_thread(
                wait_until, lambda: outbox.row(row_id).status == "sent", "row marked sent"
            )
        finally:
            await service.stop()
    assert sent and receiver.received[0].path == "/hook"


# --- Woken when a delivery is put in, not polling ----------------------------------------------

NEVER_S = 3600.0  # a poll that never comes within the test's time


@pytest.mark.parametrize(
    ("due_in_s", "wait_s"),
    [
        (None, upkeep.SEND_SAFETY_S),  # nothing pending: only a ring or the safety poll
        (-5.0, upkeep.SEND_EVERY_S),  # due, yet not claimed (another sender holds it)
        (0.5, upkeep.SEND_EVERY_S),  # never sooner than SEND_EVERY_S
        (12.0, 12.0),  # a retry: woken when it falls due
        (3600.0, upkeep.SEND_SAFETY_S),  # never later than the safety poll
    ],
)
def test_the_sender_sleeps_until_the_next_row_falls_due_within_its_bounds(
    due_in_s: float | None, wait_s: float
) -> None:
    now = datetime(2026, 12, 7, tzinfo=UTC)
    due = None if due_in_s is None else now + timedelta(seconds=due_in_s)
    assert upkeep.send_wait_s(due, now) == wait_s


def test_the_engine_rings_the_sender_once_a_notification_is_committed(
    sessions: sessionmaker[Session],
) -> None:
    watch = Watch(sessions)
    seen: list[int] = []  # the outbox as another session sees it, at each ring
    watch.engine.queued = lambda: seen.append(len(rows_of(sessions)))
    for _ in range(3):
        watch.failed()  # pending: nothing to send, no ring
    assert seen == []
    watch.failed()  # firing: its delivery committed before the ring
    assert seen == [len(NOTIFIERS)]


def rows_of(sessions: sessionmaker[Session]) -> list[DeliveryRow]:
    with sessions() as session:
        return list(session.scalars(select(DeliveryRow)))


async def forever(step: Callable[[], Awaitable[None]]) -> None:
    while True:
        await step()


def sleeping(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The waits the sender chose, each appended as it goes to sleep (for ever)."""
    waits: list[float] = []

    def chosen(due: datetime | None, now: datetime) -> float:
        waits.append(NEVER_S)
        return NEVER_S

    monkeypatch.setattr(upkeep, "send_wait_s", chosen)
    return waits


async def until(check: Callable[[], object], what: str) -> None:
    await asyncio.to_thread(wait_until, check, what)


@pytest.mark.postgres
async def test_a_delivery_another_replica_announces_is_sent_without_waiting_for_the_poll(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    waits = sleeping(monkeypatch)
    engine, other = make_engine(postgres_url), make_engine(postgres_url)
    sessions = make_sessions(engine)
    with receiving() as receiver:
        sender = Sender(sessions, {"ops": hook(receiver.url)})
        listener = Listener(engine.url, {wakeups.OUTBOX: sender.bell})
        tasks = [asyncio.create_task(listener.loop())]
        try:
            await until(lambda: listener.listening, "listening")
            await sender.bell.wait(0.0)  # the connection's ring taken: only a notice wakes it
            sending = Upkeep(sessions, engine, 30, sender=sender).send_loop
            tasks.append(asyncio.create_task(forever(sending)))
            await until(lambda: waits, "the sender found nothing and sleeps")
            elsewhere = make_sessions(other)
            _, row_id = await asyncio.to_thread(Outbox(elsewhere).fire, identity(), "ops")
            with elsewhere.begin() as session:  # the other replica's announcement
                wakeups.announce(session, wakeups.OUTBOX)
            await until(lambda: Outbox(sessions).row(row_id).status == "sent", "row sent")
            await until(lambda: len(waits) == 2, "asleep again")
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            sender.stop()
            engine.dispose()
            other.dispose()


async def test_the_safety_poll_sends_a_delivery_nobody_announced(
    sessions: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(upkeep, "SEND_SAFETY_S", 0.05)
    monkeypatch.setattr(upkeep, "SEND_EVERY_S", 0.01)
    with receiving() as receiver:
        sender = Sender(sessions, {"ops": hook(receiver.url)})
        sending = Upkeep(sessions, sessions.kw["bind"], 30, sender=sender).send_loop
        task = asyncio.create_task(forever(sending))
        try:
            _, row_id = await asyncio.to_thread(Outbox(sessions).fire, identity(), "ops")
            await until(lambda: Outbox(sessions).row(row_id).status == "sent", "row sent")
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            sender.stop()
