"""The sender's round (``Sender.send_round``): the next due time looked at first, and a
claim only when a row can be due; what is sent, and the wait it gives, as ``run_once`` then
``outbox.next_due`` gave them."""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.orm import Session, sessionmaker

from app.alerts import sender as sender_module
from app.alerts.sender import Claimed, Sender
from tests.alertmanager import Outbox, identity, receiving
from tests.alerts.test_outbox import hook

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

NOW = datetime.now(UTC)


@pytest.mark.parametrize(
    ("due_in_s", "claims", "handled", "next_in_s"),
    [
        ([], 0, 0, None),  # nothing pending: one look, no claim
        ([60.0], 0, 0, 60.0),  # a retry not due yet: no claim, woken when it falls due
        ([-1.0], 1, 1, None),  # due: sent; nothing else pending
        ([-1.0, 60.0], 1, 1, 60.0),  # one due, one later: sent, then the later one's time
        ([-2.0, -1.0], 2, 2, None),  # two due: both sent in one round
    ],
)
async def test_a_round_claims_only_when_a_row_is_due_and_tells_the_next_due_time(
    sessions: sessionmaker[Session],
    monkeypatch: pytest.MonkeyPatch,
    due_in_s: list[float],
    claims: int,
    handled: int,
    next_in_s: float | None,
) -> None:
    claimed: list[Claimed | None] = []

    def counted(session: Session, now: datetime, passed: Collection[int] = ()) -> Claimed | None:
        claimed.append(one := claim(session, now, passed))
        return one

    claim = sender_module.claim
    monkeypatch.setattr(sender_module, "claim", counted)
    outbox = Outbox(sessions)
    for n, due in enumerate(due_in_s):
        outbox.fire(identity(f"t{n}"), "ops", at=NOW + timedelta(seconds=due))
    with receiving() as receiver:
        sender = Sender(sessions, {"ops": hook(receiver.url)}, clock=lambda: NOW)
        sent, next_due = await sender.send_round()
    # A round that sends claims once more, and finds nothing: the drain's end, as before.
    assert len(claimed) == (claims + 1 if claims else 0)
    assert sent == handled == len(receiver.bodies())
    expected = None if next_in_s is None else NOW + timedelta(seconds=next_in_s)
    assert next_due == expected


async def test_a_full_batch_tells_no_next_due_time(sessions: sessionmaker[Session]) -> None:
    outbox = Outbox(sessions)
    for n in range(3):
        outbox.fire(identity(f"t{n}"), "ops", at=NOW - timedelta(seconds=1))
    with receiving() as receiver:
        sender = Sender(sessions, {"ops": hook(receiver.url)}, batch=2, clock=lambda: NOW)
        assert await sender.send_round() == (2, None)  # more may be due: the loop goes on
        assert await sender.send_round() == (1, None)
    assert len(receiver.bodies()) == 3
