"""Every probe kind keeps ``ProbeKind``'s contract (app/probe/kinds/base.py): one test per
clause, parametrized over ``KINDS``, each kind fed an answer of its own protocol."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.probe.kinds import KINDS, Answer, ProbeKind
from app.probe.readers import BodyReader, BodyTooLarge, Findings, ProbeError
from app.probe.sample import Marks, ServerTiming
from app.probe.spec import Kind
from app.probe.sse import StreamFormatError

MS = 1_000_000
STREAMS = Path(__file__).parents[1] / "data" / "streams"
SSE = "text/event-stream"
JSON = "application/json"


def _sse(name: str) -> bytes:
    return (STREAMS / f"{name}.sse").read_bytes().replace(b"\r\n", b"\n")


def _json(payload: object) -> bytes:
    return json.dumps(payload).encode()


# Per kind: good answers (content type, body, whether it streams answer tokens: a whole
# answer's time is its first byte's, which the read loop marks) and one that breaks the
# kind's protocol (None: a kind whose body has none to break).
GOOD: dict[Kind, list[tuple[str, bytes, bool]]] = {
    Kind.HTTP: [("text/html", b"<p>hello</p>" * 100, False), (SSE, _sse("openai"), False)],
    Kind.OPENAI: [
        (SSE, _sse("openai"), True),
        (SSE, _sse("llamacpp"), True),
        (JSON, _json({"choices": [{"message": {"content": "hi"}}]}), False),
    ],
    Kind.ANTHROPIC: [
        (SSE, _sse("anthropic"), True),
        (JSON, _json({"type": "message", "content": [{"type": "text", "text": "hi"}]}), False),
    ],
}
BROKEN: dict[Kind, tuple[str, bytes] | None] = {
    Kind.HTTP: None,
    Kind.OPENAI: (SSE, b'data: {"choices": [\n\n'),
    Kind.ANTHROPIC: (JSON, b"[1, 2]"),
}
KIND_IDS = [kind.value for kind in KINDS]


def _response(content_type: str) -> httpx.Response:
    return httpx.Response(200, headers={"content-type": content_type})


def _read(kind: ProbeKind, content_type: str, body: bytes, limit: int) -> tuple[BodyReader, Marks]:
    """``body`` fed in 7-byte chunks, chunk n arriving at n ms."""
    marks = Marks()
    reader = kind.reader(_response(content_type), Answer(marks, Findings(), limit))
    chunks = [body[i : i + 7] for i in range(0, len(body), 7)]
    for n, chunk in enumerate(chunks, start=1):
        reader.feed(chunk, n * MS)
    reader.close((len(chunks) + 1) * MS)
    return reader, marks


def test_every_kind_has_a_module_in_the_registry_under_its_own_name() -> None:
    assert set(KINDS) == set(Kind)
    for name, kind in KINDS.items():
        assert kind.kind is name
        assert kind.phases[0] == "connect" and kind.phases[-1] == "transfer"


@pytest.mark.parametrize("kind", KINDS.values(), ids=KIND_IDS)
def test_a_good_answer_marks_its_tokens_at_their_chunks_arrival(kind: ProbeKind) -> None:
    for content_type, body, streamed in GOOD[kind.kind]:
        reader, marks = _read(kind, content_type, body, limit=len(body))
        assert reader.streaming is streamed
        if not streamed:
            assert marks.first_answer_token is None
            continue
        first, last = marks.first_answer_token, marks.last_answer_token
        assert first is not None and last is not None and first <= last
        assert first % MS == 0 and last % MS == 0  # a chunk's arrival, not a later reading


@pytest.mark.parametrize("kind", KINDS.values(), ids=KIND_IDS)
def test_no_reader_keeps_more_than_its_limit(kind: ProbeKind) -> None:
    for content_type, body, _ in GOOD[kind.kind]:
        with pytest.raises(BodyTooLarge):
            _read(kind, content_type, body, limit=len(body) - 1)


@pytest.mark.parametrize("kind", KINDS.values(), ids=KIND_IDS)
def test_an_answer_that_breaks_the_protocol_raises_a_probe_error(kind: ProbeKind) -> None:
    broken = BROKEN[kind.kind]
    if broken is None:
        return  # a plain HTTP body has no protocol of its own to break
    with pytest.raises((ProbeError, StreamFormatError)):
        _read(kind, *broken, limit=1 << 20)


@pytest.mark.parametrize("kind", KINDS.values(), ids=KIND_IDS)
def test_redirects_are_followed_only_by_kinds_that_say_so(kind: ProbeKind) -> None:
    assert kind.follows_redirects is (kind.kind is Kind.HTTP)


optional_ns = st.none() | st.integers(min_value=0, max_value=10**11)
optional_ms = st.none() | st.floats(min_value=0, max_value=1e5)


@pytest.mark.parametrize("kind", KINDS.values(), ids=KIND_IDS)
@given(
    request_start=optional_ns,
    headers=optional_ns,
    first=optional_ns,
    last=optional_ns,
    first_byte=optional_ns,
    end=st.integers(min_value=0, max_value=10**11),
    timing=st.tuples(optional_ms, optional_ms, optional_ms, optional_ms),
    rtt=optional_ms,
    streaming=st.booleans(),
)
def test_breakdowns_add_up_never_negative_in_the_kinds_phases_and_order(
    kind: ProbeKind,
    request_start: int | None,
    headers: int | None,
    first: int | None,
    last: int | None,
    first_byte: int | None,
    end: int,
    timing: tuple[float | None, float | None, float | None, float | None],
    rtt: float | None,
    streaming: bool,
) -> None:
    recorded = Marks(
        request_start=request_start,
        response_headers=headers,
        first_byte=first_byte,
        first_answer_token=first,
        last_answer_token=last,
    )
    result = kind.breakdown(recorded, end, ServerTiming(*timing), rtt, streaming=streaming)
    names = list(result.phases)
    assert names == [name for name in kind.phases if name in result.phases]
    assert set(result.provenance) == set(names)
    assert abs(sum(result.phases.values()) - end / MS) < 0.01
    assert min(result.phases.values()) >= 0
