"""PagerDuty Events API v2. PagerDuty is someone else's service, so these tests stand a
loopback HTTP receiver in for events.pagerduty.com (``url`` is configurable: its one seam)
and hold each event to the Events API v2's fields."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from app.alerts.sender import Sender
from app.alerts.state import State
from app.config import load_targets
from app.config.errors import ConfigError
from app.notifiers.base import Delivery, TransportError
from app.notifiers.pagerduty import EVENTS_URL, PagerDuty, PagerDutyConfig, event
from tests.alertmanager import Outbox, identity, payload

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]
ROUTING_KEY = "R0" + uuid.uuid4().hex  # 34 characters, as PagerDuty's are 32
AT = datetime(2026, 11, 3, 9, 30, tzinfo=UTC)
ACCEPTED = (202, {"status": "success", "message": "Event processed"})
# The Events API v2's fields (developer.pagerduty.com, "Send an Alert Event").
EVENT_FIELDS = {"routing_key", "event_action", "dedup_key", "payload", "images", "links"}
EVENT_FIELDS |= {"client", "client_url"}
PAYLOAD_FIELDS = {"summary", "source", "severity", "timestamp", "component", "group", "class"}
PAYLOAD_FIELDS |= {"custom_details"}


@dataclass
class Receiver:
    """What the stand-in for events.pagerduty.com received, and what it answers next."""

    url: str = ""
    events: list[tuple[dict[str, str], Any]] = field(default_factory=list)
    answer: tuple[int, Any] = ACCEPTED


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's hook name
            length = int(self.headers["content-length"])
            found.events.append((dict(self.headers), json.loads(self.rfile.read(length))))
            status, body = found.answer
            if status < 300 and isinstance(body, dict):
                body = body | {"dedup_key": found.events[-1][1].get("dedup_key")}
            content = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        def log_message(self, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    found.url = f"http://127.0.0.1:{server.server_address[1]}/v2/enqueue"
    yield found
    server.shutdown()
    server.server_close()
    thread.join(10)


def pager(url: str, **fields: Any) -> PagerDuty:
    config = {"type": "pagerduty", "routing_key": ROUTING_KEY, "url": url, **fields}
    return PagerDuty("pager", PagerDutyConfig.model_validate(config))


def delivery(state: State, previous: State, transition_id: int) -> Delivery:
    body = payload(identity(), state, previous, AT, alert_id="5d0c9d1e-1b7a-4c59-9d4b-0a3e0c1f6a42")
    return Delivery(transition_id, "pager", body, transition_id=transition_id)


async def test_firing_triggers_and_resolving_resolves_one_incident(receiver: Receiver) -> None:
    notifier = pager(receiver.url, external_url="https://pw.example.com")
    fired = delivery(State.FIRING, State.PENDING, 1)
    resolved = delivery(State.RESOLVED, State.FIRING, 2)
    await notifier.notify(fired)
    await notifier.notify(resolved)
    (headers, trigger), (_, resolve) = receiver.events
    assert set(trigger) <= EVENT_FIELDS and set(trigger["payload"]) <= PAYLOAD_FIELDS
    assert trigger["routing_key"] == ROUTING_KEY and trigger["event_action"] == "trigger"
    assert trigger["dedup_key"] == fired.alert_key == resolved.alert_key
    assert len(trigger["dedup_key"]) <= 255
    assert headers["Idempotency-Key"] == fired.idempotency_key != resolved.idempotency_key
    assert trigger["payload"] == {
        "summary": fired.summary,
        "source": "seoul-1",
        "severity": "critical",
        "timestamp": "2026-11-03T09:30:00Z",
        "component": "translate-prod",
        "group": "path",
        "class": "dominant_shift",
        "custom_details": fired.labels | fired.numbers | {"state": "firing"},
    }
    assert trigger["client_url"] == "https://pw.example.com"
    assert resolve == {
        "routing_key": ROUTING_KEY,
        "dedup_key": fired.alert_key,
        "event_action": "resolve",
    }


def test_severities_pagerduty_lacks_become_error_and_long_summaries_are_cut() -> None:
    body = payload(identity(), State.FIRING, State.PENDING, AT) | {
        "severity": "page",
        "summary": "x" * 5000,
    }
    sent = event(ROUTING_KEY, Delivery(1, "pager", body))["payload"]
    assert sent["severity"] == "error" and len(sent["summary"]) == 1024


@pytest.mark.parametrize(
    ("answer", "permanent"),
    [
        ((400, {"status": "invalid event", "message": f"bad routing_key {ROUTING_KEY}"}), True),
        ((429, {"status": "throttle event"}), False),
        ((500, {"status": "error"}), False),
    ],
)
async def test_pagerduty_errors_say_whether_to_retry_and_never_show_the_key(
    receiver: Receiver, answer: tuple[int, Any], permanent: bool
) -> None:
    receiver.answer = answer
    with pytest.raises(TransportError) as caught:
        await pager(receiver.url).notify(delivery(State.FIRING, State.PENDING, 1))
    assert caught.value.permanent is permanent
    assert caught.value.message.startswith(receiver.url.removesuffix("/v2/enqueue") + ": ")
    assert f"HTTP {answer[0]}" in caught.value.message
    assert ROUTING_KEY not in caught.value.message


async def test_the_sender_triggers_resolves_and_skips_refreshes(
    sessions: sessionmaker[Session], receiver: Receiver
) -> None:
    who, outbox = identity(), Outbox(sessions)
    alert_id, fired = outbox.fire(who, "pager")
    refresh = outbox.deliver(alert_id, who, "pager", State.FIRING, State.FIRING)
    resolved = outbox.deliver(alert_id, who, "pager", State.RESOLVED, State.FIRING)
    assert await Sender(sessions, {"pager": pager(receiver.url)}).run_once() == 3
    statuses = [outbox.row(row).status for row in (fired, refresh, resolved)]
    assert statuses == ["sent", "silenced", "sent"]
    actions = [(event["event_action"], event["dedup_key"]) for _, event in receiver.events]
    assert [action for action, _ in actions] == ["trigger", "resolve"]
    assert actions[0][1] == actions[1][1]


def test_the_routing_key_comes_from_the_environment_and_is_never_shown(tmp_path: Path) -> None:
    path = tmp_path / "phasewatch.yaml"
    path.write_text("notifiers:\n  pager:\n    type: pagerduty\n    routing_key: ${PD_KEY}\n")
    parsed = load_targets(path, {"PD_KEY": ROUTING_KEY})
    config = parsed.notifiers["pager"]
    assert isinstance(config, PagerDutyConfig) and config.url == EVENTS_URL
    assert config.routing_key.get_secret_value() == ROUTING_KEY
    assert ROUTING_KEY not in repr(parsed) and ROUTING_KEY not in parsed.model_dump_json()


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ("", "phasewatch.yaml:2: notifiers.pager.routing_key: Field required"),
        (
            "    routing_key: k\n    url: events.pagerduty.com\n",
            "phasewatch.yaml:5: notifiers.pager.url",
        ),
        ("    routing_key: ${UNSET_PD_KEY}\n", "UNSET_PD_KEY"),
    ],
)
def test_bad_settings_are_refused_with_the_file_and_line(
    tmp_path: Path, fields: str, problem: str
) -> None:
    path = tmp_path / "phasewatch.yaml"
    path.write_text("notifiers:\n  pager:\n    type: pagerduty\n" + fields)
    with pytest.raises(ConfigError) as caught:
        load_targets(path, {})
    assert problem in str(caught.value)
