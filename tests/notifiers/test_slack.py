"""Slack incoming webhook. Slack is someone else's service, so these tests replace the one
outbound seam (``app.notifiers.http.transport``) with a recording fake."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from app.alerts.sender import Sender
from app.alerts.state import State
from app.config import load_targets
from app.notifiers import http
from app.notifiers.base import Delivery, TransportError
from app.notifiers.slack import Slack, SlackConfig, message
from tests.alertmanager import Outbox, identity, payload

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]
TOKEN = "XyZ" + uuid.uuid4().hex
URL = f"https://hooks.slack.example/services/T000/B000/{TOKEN}"


@pytest.fixture
def slack_requests(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[httpx.Request]]:
    """Every request Slack would get; each is answered as Slack does, ``ok``."""
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, text="ok")

    monkeypatch.setattr(http, "transport", httpx.MockTransport(handle))
    yield seen


def slack() -> Slack:
    return Slack("chat", SlackConfig.model_validate({"type": "slack", "url": URL}))


def firing(at: datetime | None = None) -> Delivery:
    at = at or datetime(2026, 11, 3, 9, 30, tzinfo=UTC)
    return Delivery(1, "chat", payload(identity(), State.FIRING, State.PENDING, at))


def test_slack_url_comes_from_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "phasewatch.yaml"
    path.write_text("notifiers:\n  chat:\n    type: slack\n    url: ${SLACK_WEBHOOK_URL}\n")
    parsed = load_targets(path, {"SLACK_WEBHOOK_URL": URL})
    config = parsed.notifiers["chat"]
    assert isinstance(config, SlackConfig) and config.url.get_secret_value() == URL
    assert TOKEN not in repr(parsed) and TOKEN not in parsed.model_dump_json()


def test_a_firing_message_reads_as_a_sentence_with_where_and_the_numbers() -> None:
    sent = message(firing())
    headline, facts, numbers = sent["blocks"]
    assert headline["text"]["text"] == (
        "🔴 *Firing*: dominant phase moved on translate-prod: generation 71.5 % → network 44 %"
    )
    assert [field["text"] for field in facts["fields"]] == [
        "*Target*\ntranslate-prod",
        "*Where*\nseoul-1 (path)",
        "*Alert*\ndominant_shift · critical",
        "*Phases*\ngeneration → network",
    ]
    assert numbers["elements"][0]["text"] == (
        "from_share_pct 71.5 · lead_pp 20.25 · runs 4 · to_share_pct 44"
    )
    assert sent["text"].startswith("Firing: dominant phase moved on translate-prod")


def test_resolved_and_service_wide_messages_say_so_and_markup_is_escaped() -> None:
    who = identity(target="a<b>&c", vantage=None)
    body = payload(who, State.RESOLVED, State.FIRING, datetime.now(UTC))
    sent = message(Delivery(2, "chat", body))
    headline = sent["blocks"][0]["text"]["text"]
    assert headline.startswith("✅ *Resolved*: dominant phase moved on a&lt;b&gt;&amp;c")
    assert sent["blocks"][1]["fields"][:2] == [
        {"type": "mrkdwn", "text": "*Target*\na&lt;b&gt;&amp;c"},
        {"type": "mrkdwn", "text": "*Where*\nall vantages (path)"},
    ]


async def test_slack_gets_one_json_post_at_its_webhook_url(
    slack_requests: list[httpx.Request],
) -> None:
    delivery = firing()
    await slack().notify(delivery)
    [request] = slack_requests
    assert (request.method, str(request.url)) == ("POST", URL)
    assert request.headers["content-type"] == "application/json"
    assert json.loads(request.content) == message(delivery)
    key = delivery.idempotency_key
    assert request.headers["idempotency-key"] == key == message(delivery)["idempotency_key"]


@pytest.mark.parametrize(
    ("answer", "permanent", "retry_after"),
    [
        (httpx.Response(404, text="no_service"), True, None),
        (httpx.Response(400, text="invalid_payload"), True, None),
        (httpx.Response(410, text="channel_is_archived"), True, None),
        (httpx.Response(429, text="rate_limited", headers={"retry-after": "30"}), False, 30.0),
        (httpx.Response(500, text="rollup_error"), False, None),
    ],
)
async def test_slack_errors_say_what_slack_said_and_whether_to_retry(
    monkeypatch: pytest.MonkeyPatch, answer: httpx.Response, permanent: bool, retry_after: Any
) -> None:
    monkeypatch.setattr(http, "transport", httpx.MockTransport(lambda request: answer))
    with pytest.raises(TransportError) as caught:
        await slack().notify(firing())
    error = caught.value
    assert (error.permanent, error.retry_after) == (permanent, retry_after)
    assert error.message == f"https://hooks.slack.example: HTTP {answer.status_code}: {answer.text}"
    assert TOKEN not in error.message


async def test_a_network_error_never_repeats_the_secret_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"cannot reach {request.url}", request=request)

    monkeypatch.setattr(http, "transport", httpx.MockTransport(refuse))
    with pytest.raises(TransportError) as caught:
        await slack().notify(firing())
    assert not caught.value.permanent
    assert (
        caught.value.message == "https://hooks.slack.example: ConnectError: cannot reach <redacted>"
    )


async def test_rate_limited_rows_wait_at_least_as_long_as_slack_asks(
    sessions: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    answer = httpx.Response(429, text="rate_limited", headers={"retry-after": "120"})
    monkeypatch.setattr(http, "transport", httpx.MockTransport(lambda request: answer))
    outbox = Outbox(sessions)
    _, row_id = outbox.fire(identity(), "chat")
    now = datetime.now(UTC) + timedelta(seconds=1)
    assert await Sender(sessions, {"chat": slack()}, clock=lambda: now).run_once() == 1
    row = outbox.row(row_id)
    assert (row.status, row.attempts) == ("pending", 1)
    assert row.next_attempt_at >= now + timedelta(seconds=120)


async def test_a_refresh_is_not_posted_to_slack(
    sessions: sessionmaker[Session], slack_requests: list[httpx.Request]
) -> None:
    who, outbox = identity(), Outbox(sessions)
    alert_id, fired = outbox.fire(who, "chat", at=datetime.now(UTC) - timedelta(minutes=15))
    refresh = outbox.deliver(alert_id, who, "chat", State.FIRING, State.FIRING)
    resolved = outbox.deliver(alert_id, who, "chat", State.RESOLVED, State.FIRING)
    assert await Sender(sessions, {"chat": slack()}).run_once() == 3
    statuses = [outbox.row(row).status for row in (fired, refresh, resolved)]
    assert statuses == ["sent", "silenced", "sent"]
    assert outbox.row(refresh).last_error == "not sent: slack notifiers hear changes, not refreshes"
    headlines = [json.loads(r.content)["blocks"][0]["text"]["text"] for r in slack_requests]
    assert [line.split("*")[1] for line in headlines] == ["Firing", "Resolved"]
