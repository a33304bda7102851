"""The agent's side of the wire: fetch the assignment, push a run, report what it refused.

Synchronous (httpx.Client): a push runs on the writer's thread, as a store does in ``serve``.
Several runs waiting go in one request (``push_batch``), answered run by run.
Failures speak the sink's vocabulary (app.runs.sink), for a fetch or a report too: an answer
that says "later" (no connection, a timeout, 401 while a token is being rotated, 429, 5xx)
raises ``SinkAway``: the run stays in the spool and is pushed again. One that says "never"
(403, 413, 422) raises ``SinkRefused``: the run is set aside, kept, not retried.
"""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import httpx

from app import __version__
from app.agents.wire import (
    BATCH_PATH,
    CONFIG_HEADER,
    CONFIG_PATH,
    RUNS_PATH,
    SENT_AT_HEADER,
    STATUS_PATH,
    VANTAGE_HEADER,
    VERSION_HEADER,
    Assignment,
    BatchAnswer,
    PushOutcome,
)
from app.runs.sink import SinkAway, SinkRefused, Stored
from app.store.records import RunRecord

TIMEOUT_S = 10.0
_LATER = frozenset({401, 408, 425, 429})


class NotAdmitted(SinkAway):
    """401: the server does not take this token for this vantage. Later, for a push (the
    token may be being rotated); at start, with no assignment kept, a mistake to say."""


class ServerClient:
    def __init__(self, server: str, token: str, vantage: str, timeout_s: float = TIMEOUT_S) -> None:
        self.vantage = vantage
        self.server = server.rstrip("/")
        headers = {
            "Authorization": f"Bearer {token}",
            VANTAGE_HEADER: vantage,
            VERSION_HEADER: __version__,
            "User-Agent": f"phasewatch-agent/{__version__}",
        }
        self._http = httpx.Client(base_url=server.rstrip("/"), headers=headers, timeout=timeout_s)
        # One push at a time, so runs arrive in order; a fetch or a status report never waits
        # behind a push (nor a push behind them: on a server that hangs, each would hold the
        # others for its whole timeout, and runs would reach the spool that much later).
        self._pushing = threading.Lock()
        # The assignment version the server named in its last answer.
        self.server_config: str | None = None

    def fetch(self) -> Assignment:
        answer = self._send("GET", CONFIG_PATH)
        assignment = Assignment.model_validate(answer.json())
        self.server_config = assignment.version
        return assignment

    def push(self, record: RunRecord) -> bool:
        """True: stored now; False: the server had it, or a run of its slot, already."""
        answer = self._post(RUNS_PATH, _json(record).encode())
        return bool(answer.json().get("stored"))

    def push_batch(self, records: Sequence[RunRecord]) -> list[Stored]:
        """Push runs in one request.

        For each run in order: True stored now, False the server had it already, a text
        why it refused it. An answer that does not name a run where it stands ends the list
        there: that run and the ones after it count as not pushed.
        """
        runs = ",".join(_json(record) for record in records)
        answer = self._post(BATCH_PATH, f'{{"runs":[{runs}]}}'.encode())
        try:
            results = BatchAnswer.model_validate(answer.json()).results
        except ValueError as exc:
            raise SinkAway(f"an answer that is not a batch's: {exc}") from exc
        taken: list[Stored] = []
        for record, result in zip(records, results, strict=False):
            if result.id is not None and result.id != str(record.id):
                break
            if result.outcome == PushOutcome.REFUSED:
                taken.append(result.reason or "refused")
            else:
                taken.append(result.outcome == PushOutcome.STORED)
        return taken

    def _post(self, path: str, body: bytes) -> httpx.Response:
        headers = {
            "Content-Encoding": "gzip",
            "Content-Type": "application/json",
            SENT_AT_HEADER: datetime.now(UTC).isoformat(),
        }
        with self._pushing:
            answer = self._send("POST", path, content=gzip.compress(body, 6), headers=headers)
        self.server_config = answer.headers.get(CONFIG_HEADER, self.server_config)
        return answer

    def report(
        self, refused: dict[str, str], pending: int | None, skipped: dict[str, dict[str, int]]
    ) -> None:
        status = {"refused": refused, "pending": pending, "skipped": skipped}
        self._send("POST", STATUS_PATH, json=status)

    def close(self) -> None:
        self._http.close()

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            answer = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise SinkAway(f"{type(exc).__name__}: {exc}") from exc
        if answer.is_success:
            return answer
        detail = _detail(answer)
        if answer.status_code == 401:
            raise NotAdmitted(f"401: {detail}")
        if answer.status_code in _LATER or answer.status_code >= 500:
            raise SinkAway(f"{answer.status_code}: {detail}")
        raise SinkRefused(f"{answer.status_code}: {detail}")


def _json(record: RunRecord) -> str:
    """A run on the wire, as the spool keeps it: compact JSON."""
    return json.dumps(record.to_json(), separators=(",", ":"))


def _detail(answer: httpx.Response) -> str:
    try:
        return str(answer.json().get("detail", ""))[:200]
    except (ValueError, AttributeError):
        return answer.text[:200]
