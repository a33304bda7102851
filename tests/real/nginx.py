"""nginx (Debian's package) on loopback with a config of our own in a temporary folder,
proxying to ``tests.real.upstream``, and its own account of every request: a line of its
access log with ``$request_time`` and ``$upstream_header_time`` (seconds, 1 ms resolution),
matched to a sample by the ``x-request-id`` it adds (``$request_id``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.helpers import free_port
from tests.real.parts import ROOT, missing, stop, wait_until_answering

REQUIRE = "PHASEWATCH_REQUIRE_NGINX"
BINARY = os.environ.get("PHASEWATCH_TEST_NGINX", "/usr/sbin/nginx")
RATE = 500 * 1024  # bytes per second on /slow/

CONFIG = """\
worker_processes 1;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 64; }}
http {{
    log_format timing '$request_id $status $request_time $upstream_header_time $request_uri';
    access_log {dir}/access.log timing;
    client_body_temp_path {dir}/tmp/body;
    proxy_temp_path {dir}/tmp/proxy;
    fastcgi_temp_path {dir}/tmp/fastcgi;
    uwsgi_temp_path {dir}/tmp/uwsgi;
    scgi_temp_path {dir}/tmp/scgi;
    upstream app {{ server 127.0.0.1:{upstream}; keepalive 4; }}
    server {{
        listen 127.0.0.1:{port};
        add_header x-request-id $request_id always;
        # Seconds where Server-Timing wants milliseconds, as configs copied about say it:
        # a fast answer reads "total;dur=0.000", which phasewatch must not believe.
        add_header Server-Timing "total;dur=$request_time" always;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        location /app/ {{ proxy_pass http://app; }}
        location /slow/ {{ proxy_pass http://app; limit_rate {rate}; proxy_max_temp_file_size 0; }}
    }}
}}
"""


@dataclass(frozen=True)
class Logged:
    """One request as nginx accounts for it (ms)."""

    request_id: str
    status: int
    request_ms: float  # first request byte read to last answer byte written
    upstream_header_ms: float | None  # upstream connect to its headers; None: no upstream


def parse_log(text: str) -> dict[str, Logged]:
    found = {}
    for line in text.splitlines():
        request_id, status, request_s, header_s, _ = line.split(" ", 4)
        header = None if header_s == "-" else float(header_s.split(",")[-1]) * 1000
        found[request_id] = Logged(request_id, int(status), float(request_s) * 1000, header)
    return found


@dataclass
class Nginx:
    url: str
    dir: Path

    def logged(self, request_ids: list[str | None], timeout_s: float = 10.0) -> list[Logged]:
        """nginx's line for each request id (it writes one as each request ends)."""
        deadline = time.monotonic() + timeout_s
        while True:
            lines = parse_log((self.dir / "access.log").read_text())
            if all(rid in lines for rid in request_ids) or time.monotonic() > deadline:
                return [lines[rid] for rid in request_ids if rid is not None]
            time.sleep(0.05)


def binary() -> str:
    found = shutil.which(BINARY)
    if found is None:
        missing("nginx", REQUIRE, f"{BINARY} not found: apt-get install nginx (.ci/run does)")
    assert found is not None
    return found


@contextmanager
def running_nginx(workdir: Path) -> Iterator[Nginx]:
    nginx = binary()
    (workdir / "tmp").mkdir(mode=0o777)
    os.chmod(workdir / "tmp", 0o777)  # workers may run as nobody
    upstream, port = free_port(), free_port()
    config = CONFIG.format(dir=workdir, upstream=upstream, port=port, rate=RATE)
    (workdir / "nginx.conf").write_text(config)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with (workdir / "upstream.log").open("wb") as log:
        app = subprocess.Popen(
            [sys.executable, "-m", "tests.real.upstream", str(upstream)],
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
            env=env,
        )
    try:
        command = [nginx, "-p", str(workdir), "-c", str(workdir / "nginx.conf")]
        command += ["-e", str(workdir / "error.log")]
        with (workdir / "nginx.out").open("wb") as out:
            server = subprocess.Popen(command, stdout=out, stderr=out, stdin=subprocess.DEVNULL)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_until_answering(f"http://127.0.0.1:{upstream}/", app, workdir / "upstream.log")
            wait_until_answering(f"{url}/app/", server, workdir / "nginx.out")
            yield Nginx(url, workdir)
        finally:
            stop(server)
    finally:
        stop(app)
