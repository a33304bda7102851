"""What the real-server tests share: finding a part (or failing when CI requires it), free
ports, waiting for a server to answer."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 60.0  # the longest a server may take to start (llama.cpp loads its model)


def missing(what: str, require: str, how: str) -> None:
    """Skip the test, or fail it when ``require`` (an environment variable) is 1."""
    message = f"{what}: {how}"
    if os.environ.get(require) == "1":
        pytest.fail(f"{message}; {require}=1 forbids skipping", pytrace=False)
    pytest.skip(message)


def wait_until_answering(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Poll ``url`` until it answers (any status), or fail with the server's log."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        try:
            httpx.get(url, timeout=2, trust_env=False)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
    raise AssertionError(f"{url} did not answer within {WAIT_S:g} s; its log ends:\n{tail}")


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)
