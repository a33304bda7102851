"""The agent's HTTP client against a loopback server that hangs on one path: a push never
waits behind a fetch the server does not answer (on a hung server each would otherwise hold
the others for its whole timeout, and runs would reach the spool that much later)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from app.agents.remote.client import ServerClient
from app.agents.wire import CONFIG_PATH, RUNS_PATH
from tests.runfactory import make_run, record_of

LIVENESS_S = 20.0  # a bound on "it never happened", not a speed claim


class Hanging(BaseHTTPRequestHandler):
    asked = threading.Event()
    released = threading.Event()

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.path == CONFIG_PATH:
            self.asked.set()
            self.released.wait(LIVENESS_S * 2)
        self._answer(b'{"detail": "not here"}', 503)

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers["content-length"]))
        self._answer(b'{"stored": true}', 200 if self.path == RUNS_PATH else 404)

    def _answer(self, body: bytes, status: int) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def hanging() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hanging)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        Hanging.released.set()
        server.shutdown()
        server.server_close()
        Hanging.released.clear()
        Hanging.asked.clear()


def test_a_push_does_not_wait_behind_a_fetch_the_server_does_not_answer(hanging: str) -> None:
    client = ServerClient(hanging, "token-0123456789abcdef", "fra-1", timeout_s=LIVENESS_S * 3)
    record = record_of(make_run(np.random.default_rng(1), datetime.now(UTC), vantage="fra-1"))
    fetching = threading.Thread(target=lambda: _swallow(client.fetch), daemon=True)
    fetching.start()
    assert Hanging.asked.wait(LIVENESS_S)  # the fetch is in, and held
    pushed: list[bool] = []
    pushing = threading.Thread(target=lambda: pushed.append(client.push(record)), daemon=True)
    pushing.start()
    try:
        pushing.join(LIVENESS_S)
        assert pushed == [True]  # stored, while the fetch still hangs
        assert fetching.is_alive() and not Hanging.released.is_set()
    finally:
        Hanging.released.set()
        fetching.join(LIVENESS_S)
        client.close()


def _swallow(call: Callable[[], object]) -> None:
    try:
        call()
    except Exception:  # the 503 it gets once released; not what this test is about
        pass
