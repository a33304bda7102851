"""`phasewatch probe --kind openai|anthropic` without --body sends a minimal streaming request
(a GET could never work): seen as the server receives it, and run end to end against the
simulated OpenAI and Anthropic endpoints, from a real process."""

from __future__ import annotations

import json

import pytest

from app.demo.sim.app import SimConfig
from app.demo.sim.server import SimServer
from tests.cliserver import probe, serving

pytestmark = [pytest.mark.process, pytest.mark.timeout(120)]

FAST = SimConfig(one_way_ms=2, queue_median_ms=5, queue_sigma=0, prefill_ms=2, tokens=4)
MESSAGES = [{"role": "user", "content": "Count from 1 to 100."}]


@pytest.mark.parametrize(
    ("kind", "model"), [("openai", "gpt-4o-mini"), ("anthropic", "claude-haiku-4-5")]
)
def test_without_a_body_the_minimal_streaming_body_is_posted(kind: str, model: str) -> None:
    with serving() as (recorder, url):
        probe(url, "--kind", kind, "--samples", "1")
    (request,) = recorder.received
    assert request.method == "POST"
    assert request.headers["content-type"] == "application/json"
    body = {"model": model, "max_tokens": 32, "stream": True, "messages": MESSAGES}
    assert json.loads(request.body) == body


def test_model_prompt_and_max_tokens_shape_the_minimal_body() -> None:
    with serving() as (recorder, url):
        probe(url, "--kind", "openai", "--samples", "1", "--model", "llama-3", "--prompt", "hi")
        probe(url, "--kind", "openai", "--samples", "1", "--max-tokens", "5")
    first, second = (json.loads(request.body) for request in recorder.received)
    assert (first["model"], first["messages"], first["max_tokens"]) == (
        "llama-3", [{"role": "user", "content": "hi"}], 32
    )  # fmt: skip
    assert (second["model"], second["max_tokens"]) == ("gpt-4o-mini", 5)


def test_anthropic_gets_its_version_header_unless_one_is_given() -> None:
    with serving() as (recorder, url):
        probe(url, "--kind", "anthropic", "--samples", "1")
        probe(url, "--kind", "anthropic", "--samples", "1", "--header", "Anthropic-Version: 2099")
    assert [r.headers["anthropic-version"] for r in recorder.received] == ["2023-06-01", "2099"]


@pytest.mark.parametrize(
    ("kind", "path"), [("openai", "chat/completions"), ("anthropic", "messages")]
)
def test_the_minimal_body_gets_a_streamed_answer_from_each_provider(kind: str, path: str) -> None:
    with SimServer(FAST) as sim:
        done = probe(f"{sim.url}/v1/{path}", "--kind", kind, "--samples", "2", "--json")
    assert done.returncode == 0, done.stderr
    samples = json.loads(done.stdout)["samples"]
    assert [s["status"] for s in samples] == ["ok", "ok"]
    assert all(s["phases"]["generation"] > 0 for s in samples)


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--kind", "openai", "--body", "{}", "--model", "m"], "--model"),
        (["--kind", "anthropic", "--body", "{}", "--prompt", "p"], "--prompt"),
        (["--max-tokens", "5"], "--max-tokens"),  # kind http: no minimal body
    ],
)
def test_minimal_body_options_where_no_minimal_body_is_sent_are_refused(
    argv: list[str], flag: str
) -> None:
    with serving() as (recorder, url):
        done = probe(url, *argv)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and flag in done.stderr
    assert recorder.received == []


def test_kind_http_without_a_body_still_gets() -> None:
    with serving() as (recorder, url):
        done = probe(url, "--samples", "1")
    assert done.returncode == 0, done.stderr
    assert [(r.method, r.body) for r in recorder.received] == [("GET", b"")]
