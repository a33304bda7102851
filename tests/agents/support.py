"""What the agent tests share: the server's targets file with two agents' vantages, their
tokens, the headers an agent sends, and a run as one pushes it."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime, timedelta

import numpy as np

from app.agents.wire import VANTAGE_HEADER
from app.store.records import RunRecord
from tests.runfactory import make_run, record_of

FRA, SEOUL = "fra-token-0123456789abcdef", "seoul-token-0123456789abcdef"
SECRET = "sk-live-this-must-stay-on-the-agent"
TARGETS = f"""
vantage: server-1
vantages:
  fra-1: {{token: "${{PW_AGENT_FRA}}"}}
  seoul-1: {{token: "{SEOUL}"}}
targets:
  - name: translate
    url: http://translate.invalid/
    interval: 1m
    headers: {{Authorization: "Bearer ${{OPENAI_API_KEY}}"}}
    vantages: [fra-1, seoul-1, server-1]
  - name: seoul-only
    url: http://seoul.invalid/
    interval: 1m
    vantages: [seoul-1]
  - name: local
    url: http://local.invalid/
    interval: 1m
"""


def agent(vantage: str, token: str | None) -> dict[str, str]:
    headers = {VANTAGE_HEADER: vantage}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def run(target: str = "translate", vantage: str = "fra-1", n: int = 3) -> RunRecord:
    at = datetime.now(UTC) - timedelta(minutes=5)
    made = make_run(np.random.default_rng(7), at, target=target, vantage=vantage, n=n)
    return record_of(made)


def packed(record: RunRecord) -> bytes:
    return gzip.compress(json.dumps(record.to_json()).encode())


GZIP = {"Content-Encoding": "gzip"}
