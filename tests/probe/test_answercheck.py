"""``expect:`` checks, table-driven: each field's pass and failure, and what an answer said
(``app.probe.answers.said``) read from every kind's streams and whole answers."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from app.probe.answercheck import AnswerSaid, Expect, failures, parse_path, same_model
from app.probe.answers import said
from app.probe.redact import Redactor
from app.probe.spec import Kind

RIGHT = AnswerSaid(
    http_status=200,
    text='{"answer": 42, "items": [{"id": "a b"}]}',
    models=["gpt-4o-2024-08-06"],
    finish_reasons=["stop"],
    answer_chunks=5,
    output_tokens=9,
)


def answer(**changes: Any) -> AnswerSaid:
    return dataclasses.replace(RIGHT, **changes)


@pytest.mark.parametrize(
    ("expect", "said_", "reasons"),
    [
        (Expect(), answer(text="", models=[], finish_reasons=[]), []),
        (Expect(status=(200,)), RIGHT, []),
        (Expect(status=(200,)), answer(http_status=204), ["status 204, expected [200]"]),
        (Expect(non_empty=True), RIGHT, []),
        (Expect(non_empty=True), answer(text=""), ["empty answer"]),
        (Expect(non_empty=True), answer(text=" \n"), ["empty answer"]),
        (Expect(model="gpt-4o"), RIGHT, []),
        (Expect(model="gpt-4o-2024-08-06"), RIGHT, []),
        (
            Expect(model="gpt-4o"),
            answer(models=["gpt-4o-mini"]),
            ["model 'gpt-4o-mini' answered, 'gpt-4o' asked"],
        ),
        (
            Expect(model="gpt-4o"),
            answer(models=["gpt-4o", "llama-3"]),
            ["model 'llama-3' answered, 'gpt-4o' asked"],
        ),
        (Expect(model="m"), answer(models=[]), ["no model named in the answer, 'm' asked"]),
        (Expect(finish_reason=("stop",)), RIGHT, []),
        (
            Expect(finish_reason=("stop",)),
            answer(finish_reasons=["length"]),
            ["finish_reason 'length', expected [stop]"],
        ),
        (
            Expect(finish_reason=("stop", "end_turn")),
            answer(finish_reasons=[]),
            ["no finish_reason, expected [stop, end_turn]"],
        ),
        (Expect(min_output_tokens=9), RIGHT, []),
        (
            Expect(min_output_tokens=10),
            RIGHT,
            ["9 output tokens, at least 10 expected"],
        ),
        (
            Expect(min_output_tokens=6),
            answer(output_tokens=None),
            ["5 answer chunks (no token count given), at least 6 expected"],
        ),
        (Expect(regex=r'"answer": \d+'), RIGHT, []),
        (
            Expect(regex=r"^\d+$"),
            answer(text="I cannot help with that."),
            ["answer 'I cannot help with that.' does not match regex '^\\\\d+$'"],
        ),
        (Expect(json_path="$.items[0]['id']"), RIGHT, []),
        (Expect(json_path="$.answer", json_equals=42), RIGHT, []),
        (
            Expect(json_path="$.answer", json_equals=41),
            RIGHT,
            ["json_path $.answer: '42', expected 41"],
        ),
        (Expect(json_path="$.missing"), RIGHT, ["json_path $.missing: nothing there"]),
        (Expect(json_path="$.items[3]"), RIGHT, ["json_path $.items[3]: nothing there"]),
        (
            Expect(json_path="$.a"),
            answer(text="not json at all"),
            ["answer 'not json at all' is not JSON (json_path $.a)"],
        ),
        (
            Expect(non_empty=True, finish_reason=("stop",)),
            answer(text="", finish_reasons=["length"]),
            ["empty answer", "finish_reason 'length', expected [stop]"],
        ),
    ],
)
def test_each_check_passes_a_right_answer_and_names_what_is_wrong(
    expect: Expect, said_: AnswerSaid, reasons: list[str]
) -> None:
    assert failures(expect, said_) == reasons


def test_a_reason_quotes_the_answer_scrubbed_of_secrets_and_cut() -> None:
    key = "sk-live-0123456789abcdef"
    echoed = answer(text=f"Your key {key} is not allowed here, and much more text after it")
    (reason,) = failures(Expect(regex="^OK$"), echoed, Redactor.of({"authorization": key}).cut)
    assert key not in reason and key[:10] not in reason
    assert reason.startswith("answer 'Your key <redacted> is not allowed here, and much more")
    assert "…'" in reason


@pytest.mark.parametrize(
    ("path", "steps"),
    [
        ("$", ()),
        ("$.a", ("a",)),
        ("$.a_b-c[0]", ("a_b-c", 0)),
        ("$['a b'][\"c\"]", ("a b", "c")),
    ],
)
def test_json_paths_read(path: str, steps: tuple[str | int, ...]) -> None:
    assert parse_path(path) == steps


@pytest.mark.parametrize("path", ["a", "$.", "$[x]", "$.a..b", "$a"])
def test_json_paths_that_do_not_read_are_refused(path: str) -> None:
    with pytest.raises(ValueError):
        parse_path(path)


@pytest.mark.parametrize(
    ("asked", "answered", "same"),
    [
        ("gpt-4o", "gpt-4o", True),
        ("gpt-4o", "gpt-4o-2024-08-06", True),
        ("claude-3-5-sonnet", "claude-3-5-sonnet-20241022", True),
        ("gpt-4o", "gpt-4o-mini", False),
        ("gpt-4o", "gpt-4o-mini-2024-07-18", False),
        ("gpt-4", "gpt-4o", False),
    ],
)
def test_a_dated_snapshot_is_the_model_asked(asked: str, answered: str, same: bool) -> None:
    assert same_model(asked, answered) is same


def _sse(*payloads: object) -> bytes:
    return b"".join(
        f"data: {p if isinstance(p, str) else json.dumps(p)}\n\n".encode() for p in payloads
    )


def _openai_chunk(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "c", "model": "m1", "choices": [choice]}


@pytest.mark.parametrize(
    ("kind", "body", "streaming", "text", "models", "reasons", "chunks", "tokens"),
    [
        (
            Kind.OPENAI,
            _sse(
                _openai_chunk({"role": "assistant"}),
                _openai_chunk({"reasoning_content": "hmm"}),
                _openai_chunk({"content": "4"}),
                _openai_chunk({"content": "2"}, "length"),
                {"id": "c", "model": "m1", "choices": [], "usage": {"completion_tokens": 3}},
                "[DONE]",
            ),
            True,
            "42",
            ["m1"],
            ["length"],
            2,
            3,
        ),
        (
            Kind.OPENAI,
            _sse(_openai_chunk({"content": [{"type": "text", "text": "parts"}]}, "stop")),
            True,
            "parts",
            ["m1"],
            ["stop"],
            1,
            None,
        ),
        (
            Kind.OPENAI,
            json.dumps(
                {
                    "model": "m2",
                    "choices": [{"message": {"content": "whole"}, "finish_reason": "stop"}],
                    "usage": {"completion_tokens": 1},
                }
            ).encode(),
            False,
            "whole",
            ["m2"],
            ["stop"],
            1,
            1,
        ),
        (
            Kind.ANTHROPIC,
            _sse(
                {
                    "type": "message_start",
                    "message": {
                        "type": "message",
                        "model": "claude-x",
                        "content": [],
                        "usage": {"output_tokens": 1},
                    },
                },
                {
                    "type": "content_block_delta",
                    "delta": {"type": "thinking_delta", "thinking": "t"},
                },
                {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "Hi"}},
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "max_tokens"},
                    "usage": {"output_tokens": 4},
                },
                {"type": "message_stop"},
            ),
            True,
            "Hi",
            ["claude-x"],
            ["max_tokens"],
            1,
            4,
        ),
        (
            Kind.ANTHROPIC,
            json.dumps(
                {
                    "type": "message",
                    "model": "claude-y",
                    "content": [
                        {"type": "thinking", "thinking": "t"},
                        {"type": "text", "text": "ok"},
                    ],
                    "stop_reason": "end_turn",
                }
            ).encode(),
            False,
            "ok",
            ["claude-y"],
            ["end_turn"],
            1,
            None,
        ),
        (Kind.HTTP, b"<html>up</html>", False, "<html>up</html>", [], [], 0, None),
    ],
)
def test_what_each_kind_of_answer_said(
    kind: Kind,
    body: bytes,
    streaming: bool,
    text: str,
    models: list[str],
    reasons: list[str],
    chunks: int,
    tokens: int | None,
) -> None:
    found = said(kind, body, streaming=streaming)
    assert (found.text, found.models, found.finish_reasons) == (text, models, reasons)
    assert (found.answer_chunks, found.output_tokens) == (chunks, tokens)
