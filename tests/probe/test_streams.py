"""SSE decoding and provider stream readers, on recorded transcripts."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from app.probe.facts import StreamFacts
from app.probe.kinds.anthropic import read_anthropic_body, read_anthropic_event
from app.probe.kinds.openai import OpenAIEventReader, read_openai_body, read_openai_event
from app.probe.readers import Findings, StreamReader
from app.probe.sample import Marks, ServerTiming, Tokens
from app.probe.sse import SSEDecoder, SSEEvent, StreamFormatError

DATA = Path(__file__).parents[1] / "data" / "streams"


def recorded(name: str) -> bytes:
    # Normalised to LF so that a checkout that rewrote line ends still tests the same bytes.
    return (DATA / f"{name}.sse").read_bytes().replace(b"\r\n", b"\n")


# Streams as the servers sent them, ids and text shortened. deepseek holds the connection
# open with comment lines while the request waits; llamacpp ends without a blank line or
# [DONE]; anthropic_overloaded fails with an error event after message_start.
TRANSCRIPTS = {
    name: recorded(name)
    for name in (
        "openai",
        "groq",
        "deepseek",
        "anthropic",
        "anthropic_overloaded",
        "llamacpp",
        "openai_error",
    )
}

LINE_ENDS = {"lf": b"\n", "crlf": b"\r\n", "cr": b"\r"}


def decode_whole(stream: bytes, **limits: int) -> list[SSEEvent]:
    decoder = SSEDecoder(**limits)
    return decoder.feed(stream) + decoder.close()


def decode_in_pieces(stream: bytes, cuts: list[int]) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        events += decoder.feed(stream[start:end])
    return events + decoder.close()


def with_line_ends(stream: bytes, end: bytes) -> bytes:
    return stream.replace(b"\n", end)


# --- the decoder -----------------------------------------------------------------------


@pytest.mark.parametrize("end", LINE_ENDS.values(), ids=LINE_ENDS.keys())
@pytest.mark.parametrize("name", TRANSCRIPTS)
def test_transcript_decodes_the_same_split_at_every_byte(name: str, end: bytes) -> None:
    stream = with_line_ends(TRANSCRIPTS[name], end)
    whole = decode_whole(stream)
    assert whole
    for cut in range(len(stream) + 1):
        assert decode_in_pieces(stream, [cut]) == whole, f"split at {cut}"


@pytest.mark.parametrize("end", LINE_ENDS.values(), ids=LINE_ENDS.keys())
@pytest.mark.parametrize("name", TRANSCRIPTS)
def test_transcript_decodes_the_same_in_random_pieces_and_byte_by_byte(
    name: str, end: bytes
) -> None:
    stream = with_line_ends(TRANSCRIPTS[name], end)
    whole = decode_whole(stream)
    rng = random.Random(name)
    for _ in range(50):
        cuts = sorted(rng.sample(range(len(stream)), rng.randint(2, 40)))
        assert decode_in_pieces(stream, cuts) == whole, f"cuts {cuts}"
    assert decode_in_pieces(stream, list(range(1, len(stream)))) == whole


@pytest.mark.parametrize("end", LINE_ENDS.values(), ids=LINE_ENDS.keys())
def test_line_ends_do_not_change_the_events(end: bytes) -> None:
    for stream in TRANSCRIPTS.values():
        assert decode_whole(with_line_ends(stream, end)) == decode_whole(stream)


def test_transcripts_decode_to_their_events() -> None:
    events = {name: decode_whole(stream) for name, stream in TRANSCRIPTS.items()}
    assert [len(events[name]) for name in TRANSCRIPTS] == [6, 5, 6, 11, 2, 2, 2]
    assert events["openai"][-1] == SSEEvent("message", "[DONE]")
    assert "\u00e9t\u00e9 \u2713" in events["openai"][2].data
    assert [event.event for event in events["anthropic_overloaded"]] == ["message_start", "error"]
    assert events["llamacpp"][-1].data.endswith('"predicted_per_second":160.0}}')


DECODER_CASES = [
    # (what it shows, stream, events)
    ("no space after colon", b"data:x\n\n", [("message", "x")]),
    ("one leading space stripped", b"data: x\n\n", [("message", "x")]),
    ("only one space stripped", b"data:  x\n\n", [("message", " x")]),
    ("colons in the value kept", b'data: {"a":"b:c"}\n\n', [("message", '{"a":"b:c"}')]),
    ("data lines joined", b"data: a\ndata:\ndata: b\n\n", [("message", "a\n\nb")]),
    ("named event", b"event: delta\ndata: x\n\n", [("delta", "x")]),
    ("empty event name is message", b"event:\ndata: x\n\n", [("message", "x")]),
    ("event without data not sent", b"event: ping\n\n", []),
    ("event name reset by blank line", b"event: a\n\ndata: x\n\n", [("message", "x")]),
    (
        "event name reset after dispatch",
        b"event: a\ndata: 1\n\ndata: 2\n\n",
        [("a", "1"), ("message", "2")],
    ),
    ("bare data field is empty data", b"data\n\n", [("message", "")]),
    ("empty data is dispatched", b"data:\n\n", [("message", "")]),
    ("comments ignored", b": ping\ndata: x\n: more\n\n:\n\n", [("message", "x")]),
    ("id and retry ignored", b"id: 7\nretry: 100\ndata: x\n\n", [("message", "x")]),
    ("unknown fields ignored", b"foo: bar\nData: no\ndata: x\n\n", [("message", "x")]),
    ("leading BOM skipped", b"\xef\xbb\xbfdata: x\n\n", [("message", "x")]),
    ("later BOM is part of the field name", b"\n\xef\xbb\xbfdata: x\n\n", []),
    ("many blank lines", b"\n\n\ndata: x\n\n\n\n", [("message", "x")]),
    (
        "last event without blank line",
        b"data: a\n\ndata: b\n",
        [("message", "a"), ("message", "b")],
    ),
    ("last line without line end", b"data: [DONE]", [("message", "[DONE]")]),
    ("mixed line ends", b"event: e\r\ndata: 1\rdata: 2\n\r\n", [("e", "1\n2")]),
    ("bad UTF-8 replaced", b"data: \xff\xfe\n\n", [("message", "\ufffd\ufffd")]),
    ("empty stream", b"", []),
]


@pytest.mark.parametrize(
    ("stream", "expected"),
    [case[1:] for case in DECODER_CASES],
    ids=[case[0] for case in DECODER_CASES],
)
def test_decoder_follows_the_event_stream_rules(
    stream: bytes, expected: list[tuple[str, str]]
) -> None:
    expected_events = [SSEEvent(event, data) for event, data in expected]
    assert decode_whole(stream) == expected_events
    assert decode_in_pieces(stream, list(range(1, len(stream)))) == expected_events


def test_events_come_out_as_soon_as_their_blank_line_arrives() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n") == []
    assert decoder.feed(b"\ndata: b") == [SSEEvent("message", "a")]
    assert decoder.feed(b"") == []
    assert decoder.close() == [SSEEvent("message", "b")]


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"") == []
    assert decoder.feed(b"\n") == []  # the LF of the CRLF, not a blank line
    assert decoder.feed(b"\r\n") == [SSEEvent("message", "a")]


def test_endless_line_raises_once_over_the_limit() -> None:
    decoder = SSEDecoder(max_line_bytes=64)
    decoder.feed(b"data: " + b"x" * 58)  # 64 bytes pending: still allowed
    with pytest.raises(StreamFormatError, match="line longer than 64 bytes"):
        decoder.feed(b"x")


@pytest.mark.parametrize(
    "stream",
    [b"data: " + b"x" * 100 + b"\n", b"data: " + b"x" * 100],
    ids=["terminated", "unterminated"],
)
def test_line_over_the_limit_in_one_chunk_raises(stream: bytes) -> None:
    with pytest.raises(StreamFormatError):
        decode_whole(stream, max_line_bytes=64)


def test_event_with_too_many_data_lines_raises() -> None:
    decoder = SSEDecoder(max_line_bytes=64, max_event_bytes=1000)
    with pytest.raises(StreamFormatError, match="event longer than 1000 bytes"):
        for _ in range(200):
            decoder.feed(b"data: 0123456789\n")


# --- the readers, over whole transcripts ------------------------------------------------


def summarise(facts: StreamFacts) -> str:
    """A: answer, R: reasoning, D: done, E: error, T: tokens, S: server timing."""
    flags = {
        "A": facts.answer,
        "R": facts.reasoning,
        "D": facts.done,
        "E": facts.error is not None,
        "T": facts.tokens is not None,
        "S": facts.server_timing is not None,
    }
    return "".join(flag for flag, on in flags.items() if on) or "-"


Reader = Callable[[SSEEvent], StreamFacts]

TRANSCRIPT_READS: list[tuple[str, Reader, list[str], Tokens, dict[str, float]]] = [
    # (transcript, reader, facts per event, tokens at the end, server timing raw at the end)
    (
        "openai",
        read_openai_event,
        ["-", "A", "A", "-", "T", "D"],
        Tokens(prompt=19, completion=4, reasoning=0),
        {},
    ),
    (
        "groq",
        read_openai_event,
        ["-", "A", "A", "TS", "D"],
        Tokens(prompt=36, completion=3),
        {
            "usage.queue_time": 37.5,
            "usage.prompt_time": 2.5,
            "usage.completion_time": 4.0,
            "usage.total_time": 6.5,
        },
    ),
    (
        "deepseek",
        read_openai_event,
        ["-", "R", "R", "A", "T", "D"],
        Tokens(prompt=11, completion=9, reasoning=7),
        {},
    ),
    (
        "anthropic",
        read_anthropic_event,
        ["T", "-", "-", "R", "-", "-", "-", "A", "-", "T", "D"],
        Tokens(prompt=50, completion=17),
        {},
    ),
    ("anthropic_overloaded", read_anthropic_event, ["T", "E"], Tokens(prompt=12), {}),
    (
        "llamacpp",
        read_openai_event,
        ["A", "TS"],
        Tokens(prompt=20, completion=2),
        {
            "timings.prompt_ms": 31.25,
            "timings.predicted_ms": 12.5,
            "timings.prompt_per_token_ms": 1.5625,
            "timings.predicted_per_token_ms": 6.25,
        },
    ),
    ("openai_error", read_openai_event, ["-", "E"], Tokens(), {}),
]


@pytest.mark.parametrize(
    ("name", "reader", "summaries", "tokens", "timing_raw"),
    TRANSCRIPT_READS,
    ids=[row[0] for row in TRANSCRIPT_READS],
)
def test_reader_finds_output_tokens_and_timing_in_recorded_stream(
    name: str, reader: Reader, summaries: list[str], tokens: Tokens, timing_raw: dict[str, float]
) -> None:
    all_facts = [reader(event) for event in decode_whole(TRANSCRIPTS[name])]
    assert [summarise(facts) for facts in all_facts] == summaries
    total_tokens, total_timing = Tokens(), ServerTiming()
    for facts in all_facts:
        total_tokens.merge(facts.tokens or Tokens())
        total_timing.merge(facts.server_timing or ServerTiming())
    assert total_tokens == tokens
    assert total_timing.raw == pytest.approx(timing_raw)


def test_groq_usage_sets_queue_prefill_and_generation() -> None:
    last_chunk = decode_whole(TRANSCRIPTS["groq"])[-2]
    timing = read_openai_event(last_chunk).server_timing
    assert timing is not None
    assert (timing.queue_ms, timing.prefill_ms, timing.generation_ms) == pytest.approx(
        (37.5, 2.5, 4.0)
    )
    assert timing.processing_ms is None


def test_llamacpp_timings_set_prefill_and_generation() -> None:
    timing = read_openai_event(decode_whole(TRANSCRIPTS["llamacpp"])[-1]).server_timing
    assert timing is not None
    assert (timing.queue_ms, timing.prefill_ms, timing.generation_ms) == (None, 31.25, 12.5)


def test_error_chunk_reports_the_server_message() -> None:
    error_chunk = decode_whole(TRANSCRIPTS["openai_error"])[-1]
    assert read_openai_event(error_chunk).error == (
        "The server had an error while processing your request. Sorry about that!"
    )


def test_anthropic_error_event_reports_the_message() -> None:
    assert (
        read_anthropic_event(decode_whole(TRANSCRIPTS["anthropic_overloaded"])[-1]).error
        == "Overloaded"
    )


# --- the readers, one event at a time ---------------------------------------------------


def chunk(delta: str, extra: str = "") -> str:
    return f'{{"object":"chat.completion.chunk","choices":[{{"index":0,"delta":{delta}}}]{extra}}}'


OPENAI_EVENTS: list[tuple[str, SSEEvent, StreamFacts]] = [
    ("done marker", SSEEvent("message", "[DONE]"), StreamFacts(done=True)),
    ("role only", SSEEvent("message", chunk('{"role":"assistant"}')), StreamFacts()),
    ("empty content", SSEEvent("message", chunk('{"content":""}')), StreamFacts()),
    ("null content", SSEEvent("message", chunk('{"content":null}')), StreamFacts()),
    (
        "finish only",
        SSEEvent("message", '{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}'),
        StreamFacts(),
    ),
    ("content", SSEEvent("message", chunk('{"content":"hi"}')), StreamFacts(answer=True)),
    ("whitespace content", SSEEvent("message", chunk('{"content":" "}')), StreamFacts(answer=True)),
    (
        "content parts",
        SSEEvent("message", chunk('{"content":[{"type":"text","text":"hi"}]}')),
        StreamFacts(answer=True),
    ),
    ("refusal", SSEEvent("message", chunk('{"refusal":"I can\'t"}')), StreamFacts(answer=True)),
    (
        "tool call opens with its name",
        SSEEvent(
            "message",
            chunk(
                '{"tool_calls":[{"index":0,"id":"call_1","type":"function",'
                '"function":{"name":"get_time","arguments":""}}]}'
            ),
        ),
        StreamFacts(answer=True),
    ),
    (
        "tool call arguments",
        SSEEvent("message", chunk('{"tool_calls":[{"index":0,"function":{"arguments":"{\\""}}]}')),
        StreamFacts(answer=True),
    ),
    (
        "tool call with nothing yet",
        SSEEvent("message", chunk('{"tool_calls":[{"index":0,"function":{"arguments":""}}]}')),
        StreamFacts(),
    ),
    (
        "legacy function call",
        SSEEvent("message", chunk('{"function_call":{"arguments":"{}"}}')),
        StreamFacts(answer=True),
    ),
    (
        "reasoning_content",
        SSEEvent("message", chunk('{"reasoning_content":"hm"}')),
        StreamFacts(reasoning=True),
    ),
    ("reasoning", SSEEvent("message", chunk('{"reasoning":"hm"}')), StreamFacts(reasoning=True)),
    ("empty reasoning", SSEEvent("message", chunk('{"reasoning":""}')), StreamFacts()),
    (
        "legacy completions text",
        SSEEvent("message", '{"object":"text_completion","choices":[{"text":"hi","index":0}]}'),
        StreamFacts(answer=True),
    ),
    (
        "usage without choices",
        SSEEvent("message", '{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}'),
        StreamFacts(tokens=Tokens(prompt=5, completion=2)),
    ),
    ("null usage", SSEEvent("message", chunk("{}", ',"usage":null')), StreamFacts()),
    (
        "error object",
        SSEEvent("message", '{"error":{"message":"Rate limit","type":"requests"}}'),
        StreamFacts(error="Rate limit"),
    ),
    (
        "vLLM error",
        SSEEvent(
            "message",
            '{"object":"error","message":"max_tokens is too large","type":"BadRequestError",'
            '"param":null,"code":400}',
        ),
        StreamFacts(error="max_tokens is too large"),
    ),
    (
        "TGI error string",
        SSEEvent("message", '{"error":"Input validation error","error_type":"validation"}'),
        StreamFacts(error="Input validation error"),
    ),
    (
        "error event with JSON",
        SSEEvent("error", '{"error":{"message":"upstream timeout"}}'),
        StreamFacts(error="upstream timeout"),
    ),
    (
        "error event with text",
        SSEEvent("error", "upstream timeout"),
        StreamFacts(error="upstream timeout"),
    ),
    (
        "error without message",
        SSEEvent("message", '{"error":{"type":"server_error"}}'),
        StreamFacts(error="server_error"),
    ),
]


@pytest.mark.parametrize(
    ("event", "expected"),
    [case[1:] for case in OPENAI_EVENTS],
    ids=[case[0] for case in OPENAI_EVENTS],
)
def test_openai_event_facts(event: SSEEvent, expected: StreamFacts) -> None:
    assert read_openai_event(event) == expected


def anthropic_delta(delta: str) -> SSEEvent:
    data = f'{{"type":"content_block_delta","index":0,"delta":{delta}}}'
    return SSEEvent("content_block_delta", data)


def block_start(block: str) -> SSEEvent:
    data = f'{{"type":"content_block_start","index":0,"content_block":{block}}}'
    return SSEEvent("content_block_start", data)


ANTHROPIC_EVENTS: list[tuple[str, SSEEvent, StreamFacts]] = [
    ("text", anthropic_delta('{"type":"text_delta","text":"Hi"}'), StreamFacts(answer=True)),
    ("empty text", anthropic_delta('{"type":"text_delta","text":""}'), StreamFacts()),
    (
        "tool input",
        anthropic_delta('{"type":"input_json_delta","partial_json":"{\\"city\\": "}'),
        StreamFacts(answer=True),
    ),
    (
        "empty tool input",
        anthropic_delta('{"type":"input_json_delta","partial_json":""}'),
        StreamFacts(),
    ),
    (
        "thinking",
        anthropic_delta('{"type":"thinking_delta","thinking":"Let me"}'),
        StreamFacts(reasoning=True),
    ),
    ("signature", anthropic_delta('{"type":"signature_delta","signature":"EqQB"}'), StreamFacts()),
    ("empty text block", block_start('{"type":"text","text":""}'), StreamFacts()),
    (
        "tool use block opens with its name",
        block_start('{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}'),
        StreamFacts(answer=True),
    ),
    (
        "redacted thinking block",
        block_start('{"type":"redacted_thinking","data":"EmwKAhgB"}'),
        StreamFacts(reasoning=True),
    ),
    ("ping", SSEEvent("ping", '{"type": "ping"}'), StreamFacts()),
    (
        "block stop",
        SSEEvent("content_block_stop", '{"type":"content_block_stop","index":0}'),
        StreamFacts(),
    ),
    ("stop", SSEEvent("message_stop", '{"type":"message_stop"}'), StreamFacts(done=True)),
    (
        "type wins over event name",
        SSEEvent("message", '{"type":"message_stop"}'),
        StreamFacts(done=True),
    ),
    ("event name when no type", SSEEvent("message_stop", "{}"), StreamFacts(done=True)),
    (
        "message_start gives input tokens only",
        SSEEvent(
            "message_start",
            '{"type":"message_start","message":{"usage":{"input_tokens":9,"output_tokens":1}}}',
        ),
        StreamFacts(tokens=Tokens(prompt=9)),
    ),
    (
        "message_delta gives output tokens",
        SSEEvent(
            "message_delta",
            '{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":30}}',
        ),
        StreamFacts(tokens=Tokens(completion=30)),
    ),
    (
        "error without event name",
        SSEEvent("message", '{"type":"error","error":{"type":"api_error","message":"Internal"}}'),
        StreamFacts(error="Internal"),
    ),
    ("error event with text", SSEEvent("error", "Bad gateway"), StreamFacts(error="Bad gateway")),
    ("unknown type", SSEEvent("future_event", '{"type":"future_event"}'), StreamFacts()),
]


@pytest.mark.parametrize(
    ("event", "expected"),
    [case[1:] for case in ANTHROPIC_EVENTS],
    ids=[case[0] for case in ANTHROPIC_EVENTS],
)
def test_anthropic_event_facts(event: SSEEvent, expected: StreamFacts) -> None:
    assert read_anthropic_event(event) == expected


MALFORMED = [
    ("truncated JSON", '{"choices":[{"delta":{"content":"hi"'),
    ("JSON array", '[{"choices":[]}]'),
    ("JSON string", '"hello"'),
    ("empty data", ""),
    ("plain text", "hello"),
]


@pytest.mark.parametrize("reader", [read_openai_event, read_anthropic_event])
@pytest.mark.parametrize("data", [case[1] for case in MALFORMED], ids=[c[0] for c in MALFORMED])
def test_malformed_event_data_raises_stream_format_error(reader: Reader, data: str) -> None:
    with pytest.raises(StreamFormatError):
        reader(SSEEvent("message", data))


def test_an_openai_stream_read_as_anthropic_says_which_kind_it_looks_like() -> None:
    with pytest.raises(StreamFormatError) as caught:
        read_anthropic_event(SSEEvent("message", "[DONE]"))
    assert str(caught.value) == "an OpenAI-style stream, not Anthropic's (kind: openai?): '[DONE]'"


# --- whole bodies -----------------------------------------------------------------------

OPENAI_BODY = b"""{
  "id": "chatcmpl-B9x2",
  "object": "chat.completion",
  "created": 1741000500,
  "model": "gpt-4o-mini-2024-07-18",
  "choices": [
    {
      "index": 0,
      "message": {"role": "assistant", "content": "Pong", "refusal": null, "annotations": []},
      "logprobs": null,
      "finish_reason": "stop"
    }
  ],
  "usage": {
    "prompt_tokens": 19, "completion_tokens": 2, "total_tokens": 21,
    "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0}
  },
  "service_tier": "default",
  "system_fingerprint": "fp_06737a9306"
}"""

GROQ_BODY = (
    b'{"id":"chatcmpl-9f","object":"chat.completion","created":1741000600,'
    b'"model":"llama-3.3-70b-versatile","choices":[{"index":0,"message":{"role":"assistant",'
    b'"content":"Pong"},"logprobs":null,"finish_reason":"stop"}],"usage":{"queue_time":0.25,'
    b'"prompt_tokens":40,"prompt_time":0.005,"completion_tokens":2,"completion_time":0.0025,'
    b'"total_time":0.0075},"system_fingerprint":"fp_c0cfa69934","x_groq":{"id":"req_01jp"}}'
)

TOOL_CALL_BODY = (
    b'{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant",'
    b'"content":null,"tool_calls":[{"id":"call_1","type":"function","function":'
    b'{"name":"get_time","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}'
)

REASONING_BODY = (
    b'{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant",'
    b'"content":"Pong","reasoning_content":"One word."},"finish_reason":"stop"}],'
    b'"usage":{"prompt_tokens":10,"completion_tokens":8,'
    b'"completion_tokens_details":{"reasoning_tokens":5}}}'
)

BODIES: list[tuple[str, bytes, StreamFacts]] = [
    (
        "openai",
        OPENAI_BODY,
        StreamFacts(answer=True, tokens=Tokens(prompt=19, completion=2, reasoning=0)),
    ),
    (
        "groq",
        GROQ_BODY,
        StreamFacts(
            answer=True,
            tokens=Tokens(prompt=40, completion=2),
            server_timing=ServerTiming(
                queue_ms=250.0,
                prefill_ms=5.0,
                generation_ms=2.5,
                raw={
                    "usage.queue_time": 250.0,
                    "usage.prompt_time": 5.0,
                    "usage.completion_time": 2.5,
                    "usage.total_time": 7.5,
                },
            ),
        ),
    ),
    ("tool call", TOOL_CALL_BODY, StreamFacts(answer=True)),
    (
        "reasoning",
        REASONING_BODY,
        StreamFacts(
            answer=True, reasoning=True, tokens=Tokens(prompt=10, completion=8, reasoning=5)
        ),
    ),
    (
        "empty answer",
        b'{"choices":[{"index":0,"message":{"role":"assistant","content":""}}]}',
        StreamFacts(),
    ),
    (
        "error",
        b'{"error":{"message":"Invalid API key","type":"invalid_request_error",'
        b'"code":"invalid_api_key"}}',
        StreamFacts(error="Invalid API key"),
    ),
]


@pytest.mark.parametrize(
    ("body", "expected"), [case[1:] for case in BODIES], ids=[case[0] for case in BODIES]
)
def test_openai_body_facts(body: bytes, expected: StreamFacts) -> None:
    assert read_openai_body(body) == expected


ANTHROPIC_BODY = (
    b'{"id":"msg_01A","type":"message","role":"assistant","model":"claude-sonnet-4-20250514",'
    b'"content":[{"type":"thinking","thinking":"One word.","signature":"Eq"},'
    b'{"type":"text","text":"Pong."}],"stop_reason":"end_turn","stop_sequence":null,'
    b'"usage":{"input_tokens":20,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,'
    b'"output_tokens":12}}'
)


def test_anthropic_body_facts() -> None:
    assert read_anthropic_body(ANTHROPIC_BODY) == StreamFacts(
        answer=True, reasoning=True, tokens=Tokens(prompt=20, completion=12)
    )
    overloaded = b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    assert read_anthropic_body(overloaded) == StreamFacts(error="Overloaded")


@pytest.mark.parametrize("reader", [read_openai_body, read_anthropic_body])
@pytest.mark.parametrize(
    "body", [b"", b"<html>502 Bad Gateway</html>", b'{"choices": [', b"[]", b"\xff\xfe\x00"]
)
def test_malformed_body_raises_stream_format_error(
    reader: Callable[[bytes], StreamFacts], body: bytes
) -> None:
    with pytest.raises(StreamFormatError):
        reader(body)


# --- the decoder against a line-by-line reference, on random streams --------------------


def reference_decode(stream: bytes) -> list[SSEEvent]:
    """The WHATWG algorithm as written: one line at a time."""
    text = stream.decode("utf-8", "replace").removeprefix("\ufeff")
    lines = re.split(r"\r\n|\r|\n", text)
    name, data, events = "", [], []
    for line in lines:
        if not line:
            if data:
                events.append(SSEEvent(name or "message", "\n".join(data)))
            name, data = "", []
            continue
        field_name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field_name == "data":
            data.append(value)
        elif field_name == "event":
            name = value
    if data:
        events.append(SSEEvent(name or "message", "\n".join(data)))
    return events


STREAM_PIECES = [b"data: ", b"data:", b"event: e", b": ping", b"id: 1", b"x", b"{}", b" ", b":"]
STREAM_PIECES += [b"\n", b"\n", b"\n", b"\r", b"\r\n", b"\xc3\xa9", b"\xef\xbb\xbf", b"\xff"]


def test_decoder_agrees_with_a_line_by_line_reference_on_random_streams() -> None:
    rng = random.Random(7)
    for _ in range(400):
        stream = b"".join(rng.choice(STREAM_PIECES) for _ in range(rng.randint(0, 40)))
        if b"\xef\xbb\xbf" in stream[3:] or b"\xff" in stream or b"\xc3\xa9" in stream:
            # Bytes that are not a whole character decode per line, as a server's lines do.
            stream = stream.replace(b"\xef\xbb\xbf", b"").replace(b"\xff", b"?")
        expected = reference_decode(stream)
        cuts = sorted(rng.sample(range(len(stream) + 1), min(len(stream) + 1, 5)))
        assert decode_in_pieces(stream, cuts) == expected, stream


def test_comment_lines_without_a_blank_line_are_bounded_too() -> None:
    decoder = SSEDecoder(max_line_bytes=64, max_event_bytes=1000)
    with pytest.raises(StreamFormatError, match="event longer than 1000 bytes"):
        for _ in range(200):
            decoder.feed(b": keep-alive\n")


# --- the per-stream OpenAI reader: its shortcut never changes a fact ---------------------


def envelope(text: str) -> str:
    return (
        '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m",'
        f'"choices":[{{"index":0,"delta":{{"content":"{text}"}},"finish_reason":null}}]}}'
    )


def facts_or_error(reader: Reader, event: SSEEvent) -> StreamFacts | str:
    try:
        return reader(event)
    except StreamFormatError:
        return "StreamFormatError"


@pytest.mark.parametrize("name", ["openai", "groq", "deepseek", "llamacpp", "openai_error"])
def test_event_reader_gives_the_facts_of_read_openai_event_on_transcripts(name: str) -> None:
    events = decode_whole(TRANSCRIPTS[name])
    reader = OpenAIEventReader()
    assert [reader(e) for e in events] == [read_openai_event(e) for e in events]


SHORTCUT_CASES = [
    # (what it shows, data after an ordinary chunk, expected summary)
    ("same envelope, other text", envelope("world"), "A"),
    ("same envelope, empty text", envelope(""), "-"),
    ("escaped quote is parsed", envelope('say \\"hi\\"'), "A"),
    (
        "text that closes the string early",
        envelope('x","usage":{"prompt_tokens":3}}'),
        "StreamFormatError",
    ),
    ("envelope cut short", envelope("x")[:-3], "StreamFormatError"),
    ("raw control character", envelope("a\tb"), "StreamFormatError"),
    ("other envelope", envelope("x").replace('"m"', '"n"'), "A"),
    ("error object", '{"error":{"message":"boom"}}', "E"),
    ("done", "[DONE]", "D"),
]


@pytest.mark.parametrize(
    ("data", "expected"),
    [case[1:] for case in SHORTCUT_CASES],
    ids=[case[0] for case in SHORTCUT_CASES],
)
def test_event_reader_shortcut_matches_a_full_parse(data: str, expected: str) -> None:
    reader = OpenAIEventReader()
    assert reader(SSEEvent("message", envelope("Hello"))) == StreamFacts(answer=True)
    got = facts_or_error(reader, SSEEvent("message", data))
    assert got == facts_or_error(read_openai_event, SSEEvent("message", data))
    assert (got if isinstance(got, str) else summarise(got)) == expected


def test_event_reader_shortcut_on_random_texts_matches_a_full_parse() -> None:
    rng = random.Random(11)
    alphabet = ["a", " ", "é", "✓", '"', "\\", "\\n", "\\u00e9", "\t", "}", ",", "{"]
    alphabet += ["\u2028", "\xa0"]  # valid in JSON strings, yet not printable
    reader = OpenAIEventReader()
    reader(SSEEvent("message", envelope("first")))
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
        event = SSEEvent(rng.choice(["message", "error"]), envelope(text))
        assert facts_or_error(reader, event) == facts_or_error(read_openai_event, event), text


# --- the chunk shortcut: one whole ordinary answer event, no decoder ----------------------


def chunk_of(data: str, end: bytes = b"\n\n") -> bytes:
    return b"data: " + data.encode() + end


def learned_reader() -> OpenAIEventReader:
    reader = OpenAIEventReader()
    assert reader(SSEEvent("message", envelope("Hello"))) == StreamFacts(answer=True)
    return reader


CHUNK_CASES = [
    # (what it shows, chunk, whether the shortcut takes it)
    ("an ordinary chunk", chunk_of(envelope("world")), True),
    ("non-ASCII text", chunk_of(envelope("세계 ✓")), True),
    ("empty text", chunk_of(envelope("")), False),
    ("escaped quote", chunk_of(envelope('say \\"hi\\"')), False),
    ("two events in one chunk", chunk_of(envelope("a")) + chunk_of(envelope("b")), False),
    ("CRLF line ends", chunk_of(envelope("a"), b"\r\n\r\n"), False),
    ("no blank line yet", chunk_of(envelope("a"), b"\n"), False),
    ("an event name first", b"event: error\n" + chunk_of(envelope("a")), False),
    ("invalid UTF-8", chunk_of(envelope("a")).replace(b"a", b"\xff", 1), False),
    ("other envelope", chunk_of(envelope("a").replace('"m"', '"n"')), False),
]


@pytest.mark.parametrize(
    ("chunk", "taken"), [case[1:] for case in CHUNK_CASES], ids=[case[0] for case in CHUNK_CASES]
)
def test_answer_chunk_takes_only_one_whole_ordinary_answer_event(chunk: bytes, taken: bool) -> None:
    assert learned_reader().answer_chunk(chunk) is taken
    if taken:  # and then it is what the decoder and a full parse make of it
        (event,) = decode_whole(chunk)
        assert read_openai_event(event) == StreamFacts(answer=True)


def test_answer_chunk_needs_a_learned_envelope_on_one_line() -> None:
    assert not OpenAIEventReader().answer_chunk(chunk_of(envelope("a")))
    reader = OpenAIEventReader()
    reader(SSEEvent("message", envelope("Hello").replace(",", ",\n", 1)))  # two data lines
    assert not reader.answer_chunk(chunk_of(envelope("a")))


def test_answer_chunk_on_random_texts_agrees_with_the_decoder_and_a_full_parse() -> None:
    rng = random.Random(12)
    alphabet = ["a", " ", "é", "✓", '"', "\\", "\\n", "\t", "\n", "\r", "}", "\u2028", "\xa0"]
    reader = learned_reader()
    taken = 0
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
        chunk = chunk_of(envelope(text))
        plain = bool(text) and '"' not in text and "\\" not in text and text.isprintable()
        assert reader.answer_chunk(chunk) is plain, text
        if plain:
            taken += 1
            events = decode_whole(chunk)
            assert [read_openai_event(e) for e in events] == [StreamFacts(answer=True)], text
    assert taken > 20  # the shortcut is taken, not just never wrong


def read_stream(stream: bytes, cuts: list[int], *, shortcut: bool) -> tuple[Marks, Findings]:
    marks, findings = Marks(), Findings()
    interpret = OpenAIEventReader()
    answer_chunk = interpret.answer_chunk if shortcut else None
    reader = StreamReader(interpret, marks, findings, 1 << 24, answer_chunk=answer_chunk)
    pieces = zip([0, *cuts], [*cuts, len(stream)], strict=True)
    for now_ns, (start, end) in enumerate(pieces, start=1):
        reader.feed(stream[start:end], now_ns)
    reader.close(len(cuts) + 2)
    return marks, findings


# A long answer as servers stream it, with texts the shortcut must leave to the full parse.
LONG_ANSWER = b"".join(
    [
        chunk_of(envelope("")),
        *(chunk_of(envelope(text)) for text in ["Hello", " wor", "ld", "é ✓", 'a \\"b\\"']),
        *(chunk_of(envelope(f"tok{i} ")) for i in range(30)),
        chunk_of(envelope("line\\nbreak")),
        chunk_of(
            '{"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":37}}'
        ),
        b"data: [DONE]\n\n",
    ]
)
STREAMS = TRANSCRIPTS | {"long answer": LONG_ANSWER}


@pytest.mark.parametrize("name", ["openai", "groq", "deepseek", "llamacpp", "long answer"])
def test_stream_reader_marks_the_same_with_the_shortcut_as_without(name: str) -> None:
    stream = STREAMS[name]
    events = [m.end() for m in re.finditer(rb"\n\n", stream)]
    rng = random.Random(name)
    chunkings = [events[:-1], sorted(rng.sample(range(1, len(stream)), 12))]
    chunkings.append(sorted(set(events[:-1]) | set(rng.sample(range(1, len(stream)), 5))))
    for cuts in chunkings:
        assert read_stream(stream, cuts, shortcut=True) == read_stream(
            stream, cuts, shortcut=False
        ), cuts
