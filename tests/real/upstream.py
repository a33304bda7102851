"""The upstream nginx proxies to: ``python -m tests.real.upstream PORT``, a threaded HTTP/1.1
server in a process of its own. ``GET /<any>/work?ms=N&bytes=B&timing=1`` waits N ms, then
answers B bytes, with ``Server-Timing: app;dur=<the ms it waited>`` when ``timing=1``."""

from __future__ import annotations

import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The headers and the body leave in two writes: without this, Nagle holds the body for
    # nginx's delayed ACK (40 ms on a kept-alive upstream connection).
    disable_nagle_algorithm = True

    def do_GET(self) -> None:
        began = time.perf_counter()
        query = {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}
        time.sleep(float(query.get("ms", 0)) / 1000)
        body = b"x" * int(query.get("bytes", 2))
        self.send_response(200)
        self.send_header("content-type", "text/plain")
        self.send_header("content-length", str(len(body)))
        if query.get("timing") == "1":
            self.send_header("server-timing", f"app;dur={(time.perf_counter() - began) * 1e3:.3f}")
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            pass  # nginx gave up on it (its client was cut)

    def log_message(self, format: str, *args: object) -> None:
        pass


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
