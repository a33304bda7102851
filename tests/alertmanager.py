"""Real parts for the notifier tests: a loopback HTTP receiver, an Alertmanager process,
and outbox rows written the way the alert engine writes them.

``Receiver`` records every POST and answers from a script (status codes, ``"hang"``);
``Alertmanager`` runs /usr/bin/prometheus-alertmanager (Debian's prometheus-alertmanager)
on a free loopback port with clustering off, its webhook pointed at a ``Receiver``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from app.alerts.identity import Identity, Transition
from app.alerts.state import State
from app.store.models import AlertRow, AlertTransitionRow, DeliveryRow
from tests.helpers import eventually, free_port

HANG = "hang"
WAIT_S = 20.0  # the longest any test waits for a process or a notification


# --- A loopback receiver ------------------------------------------------------------------


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Receiver:
    """Answers POSTs with ``script`` (status codes or ``HANG``) in order, then 200."""

    script: list[int | str] = field(default_factory=list)
    delay_s: float = 0.0
    received: list[Received] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    port: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def bodies(self, path: str | None = None) -> list[Any]:
        with self._lock:
            return [r.body for r in self.received if path is None or r.path == path]

    def _answer(self, request: Received) -> int | str:
        with self._lock:
            self.received.append(request)
            return self.script.pop(0) if self.script else 200

    def wait_for(self, check: Callable[[list[Any]], bool], path: str | None = None) -> list[Any]:
        def received() -> list[Any] | None:
            bodies = self.bodies(path)
            return bodies if check(bodies) else None

        try:
            found: list[Any] = eventually(received, WAIT_S, "the expected bodies")
        except AssertionError as missing:
            raise AssertionError(f"{missing}; got {self.bodies(path)}") from None
        return found


@contextmanager
def receiving(receiver: Receiver | None = None) -> Iterator[Receiver]:
    receiver = receiver or Receiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))
    server.daemon_threads = True
    receiver.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield receiver
    finally:
        receiver.release.set()
        server.shutdown()
        server.server_close()
        thread.join(WAIT_S)


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length", 0)))
            request = Received(self.path, dict(self.headers.items()), json.loads(raw or b"null"))
            answer = receiver._answer(request)
            if answer == HANG:
                receiver.release.wait(WAIT_S)
                return
            time.sleep(receiver.delay_s)
            # Echo the path: proves errors do not repeat what a receiver echoes of a secret.
            text = f"answer {answer} for {self.path}".encode()
            self.send_response(int(answer))
            self.send_header("content-length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


# --- Alertmanager --------------------------------------------------------------------------

BINARY = os.environ.get("PHASEWATCH_TEST_ALERTMANAGER", "/usr/bin/prometheus-alertmanager")
CONFIG = """\
route:
  receiver: recorder
  group_by: ['...']
  group_wait: 200ms
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: recorder
    webhook_configs:
      - url: {hook}
        send_resolved: true
"""


def alertmanager_binary() -> str:
    found = shutil.which(BINARY) or shutil.which("alertmanager")
    if found:
        return found
    message = f"{BINARY} not found: apt-get install prometheus-alertmanager (.ci/run does)"
    if os.environ.get("PHASEWATCH_REQUIRE_ALERTMANAGER") == "1":
        pytest.fail(f"{message}; PHASEWATCH_REQUIRE_ALERTMANAGER=1 forbids skipping")
    pytest.skip(message)


@dataclass
class Alertmanager:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def alerts(self, **labels: str) -> list[dict[str, Any]]:
        """Alertmanager's own view: ``GET /api/v2/alerts`` filtered by label."""
        matchers = [f'{name}="{value}"' for name, value in labels.items()]
        with httpx.Client(trust_env=False, timeout=5) as client:
            response = client.get(f"{self.url}/api/v2/alerts", params={"filter": matchers})
        response.raise_for_status()
        found: list[dict[str, Any]] = response.json()
        return found


@contextmanager
def running_alertmanager(workdir: Path, hook: str) -> Iterator[Alertmanager]:
    binary = alertmanager_binary()
    (workdir / "alertmanager.yml").write_text(CONFIG.format(hook=hook))
    for _ in range(3):  # a free port can be taken between choosing and binding it
        with _started(binary, workdir, free_port()) as alertmanager:
            if alertmanager is not None:
                yield alertmanager
                return
    raise AssertionError(
        f"Alertmanager did not start: {(workdir / 'alertmanager.log').read_text()}"
    )


@contextmanager
def _started(binary: str, workdir: Path, port: int) -> Iterator[Alertmanager | None]:
    log = workdir / "alertmanager.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={workdir / 'alertmanager.yml'}",
                f"--storage.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--cluster.listen-address=",
                "--log.level=warn",
            ],
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        yield Alertmanager(url, process, log) if _ready(url, process) else None
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def _ready(url: str, process: subprocess.Popen[bytes]) -> bool:
    deadline = time.monotonic() + WAIT_S
    with httpx.Client(trust_env=False, timeout=1) as client:
        while time.monotonic() < deadline and process.poll() is None:
            try:
                if client.get(f"{url}/-/ready").status_code == 200:
                    return True
            except httpx.TransportError:
                pass
            time.sleep(0.1)
    return False


def wait_until(check: Callable[[], Any], what: str) -> Any:
    return eventually(check, WAIT_S, what)


# --- Outbox rows ---------------------------------------------------------------------------

NUMBERS = {"from_share_pct": 71.5, "to_share_pct": 44.0, "lead_pp": 20.25, "runs": 4}


def identity(target: str = "translate-prod", vantage: str | None = "seoul-1") -> Identity:
    return Identity("dominant_shift", target, vantage, "path", "generation", "network")


def payload(
    who: Identity,
    state: State,
    previous: State,
    at: datetime,
    ends_in_s: float = 3600.0,
    alert_id: str | None = None,
) -> dict[str, Any]:
    """What the engine writes: ``Transition.to_json()`` plus labels and ``ends_at``."""
    transition = Transition(
        alert_id=alert_id or str(uuid.uuid4()),
        identity=who,
        at=at,
        before=previous,
        after=state,
        summary=f"dominant phase moved on {who.target}: generation 71.5 % → network 44 %",
        numbers=NUMBERS,
    )
    ends_at = at + timedelta(seconds=ends_in_s) if state is State.FIRING else at
    return transition.to_json() | {
        "labels": who.labels(),
        "ends_at": ends_at.isoformat().replace("+00:00", "Z"),
    }


@dataclass
class Outbox:
    """Writes alerts and their deliveries, as ``app.alerts.engine`` does."""

    sessions: sessionmaker[Session]

    def alert(self, who: Identity, fired_at: datetime) -> uuid.UUID:
        alert_id = uuid.uuid4()
        with self.sessions.begin() as session:
            session.add(
                AlertRow(
                    id=alert_id,
                    kind=who.kind,
                    target=who.target,
                    vantage=who.vantage,
                    scope=who.scope,
                    from_phase=who.from_phase,
                    to_phase=who.to_phase,
                    severity=who.severity,
                    state="firing",
                    streak=0,
                    opened_at=fired_at - timedelta(minutes=30),
                    fired_at=fired_at,
                    summary="",
                    numbers={},
                    updated_at=fired_at,
                )
            )
        return alert_id

    def deliver(
        self,
        alert_id: uuid.UUID,
        who: Identity,
        notifier: str,
        state: State,
        previous: State,
        at: datetime | None = None,
        ends_in_s: float = 3600.0,
        created_at: datetime | None = None,
        labels: dict[str, str] | None = None,
    ) -> int:
        at = at or datetime.now(UTC)
        body = payload(who, state, previous, at, ends_in_s, str(alert_id))
        if labels is not None:
            body["labels"] = labels
        with self.sessions.begin() as session:
            step = None
            if state is not previous:
                step = AlertTransitionRow(
                    alert_id=alert_id,
                    at=at,
                    before=previous.value,
                    after=state.value,
                    summary=body["summary"],
                    numbers=body["numbers"],
                )
                session.add(step)
                session.flush()
            row = DeliveryRow(
                alert_id=alert_id,
                transition_id=step.id if step else None,
                notifier=notifier,
                payload=body,
                status="pending",
                attempts=0,
                next_attempt_at=created_at or at,
                created_at=created_at or at,
            )
            session.add(row)
            session.flush()
            return row.id

    def fire(
        self, who: Identity, notifier: str, at: datetime | None = None
    ) -> tuple[uuid.UUID, int]:
        at = at or datetime.now(UTC)
        alert_id = self.alert(who, at)
        return alert_id, self.deliver(alert_id, who, notifier, State.FIRING, State.PENDING, at)

    def row(self, delivery_id: int) -> DeliveryRow:
        with self.sessions() as session:
            row = session.get(DeliveryRow, delivery_id)
            assert row is not None
            return row
