"""Records the answers the replay tests serve (tests/probe/test_replays.py): the exact bytes
llama.cpp's server and nginx send, headers and chunked framing included.

``PHASEWATCH_LLM_PYTHON=… python -m tests.real.record tests/data/real`` starts both servers,
sends each request once on a raw socket and writes ``<name>.http`` per answer. Ids and
dates stay as they were sent: nothing in them is secret.
"""

from __future__ import annotations

import json
import socket
import sys
import tempfile
from pathlib import Path

from tests.real.llama import chat_body, prompt, running_llama
from tests.real.nginx import running_nginx
from tests.real.rawclient import _complete, _length


def raw_exchange(url: str, request: bytes) -> bytes:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(request)
        received, head_end, length = bytearray(), -1, None
        while head_end < 0 or not _complete(received, head_end, length):
            received += sock.recv(65536)
            if head_end < 0 and (head_end := received.find(b"\r\n\r\n")) >= 0:
                length = _length(bytes(received[:head_end]))
    return bytes(received)


def post(url: str, path: str, body: object) -> bytes:
    data = json.dumps(body).encode()
    head = f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
    return raw_exchange(url, head.encode() + f"content-length: {len(data)}\r\n\r\n".encode() + data)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp())
    with running_llama(work) as llama:
        chat = "/v1/chat/completions"
        post(llama.url, chat, chat_body(prompt(8), 4, stream=False))  # warm
        answers = {
            "llamacpp-whole": post(llama.url, chat, chat_body(prompt(8), 12, stream=False)),
            "llamacpp-stream": post(llama.url, chat, chat_body(prompt(8), 12, stream=True)),
        }
    with running_nginx(work) as nginx:
        request = b"GET /app/work?ms=30&bytes=64 HTTP/1.1\r\nhost: x\r\n\r\n"
        answers["nginx-app"] = raw_exchange(nginx.url, request)
    for name, answer in answers.items():
        (out / f"{name}.http").write_bytes(answer)
        sys.stdout.write(f"{out / name}.http: {len(answer)} bytes\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
