"""Per-token timing: the reads of a stream, stamped, through the real stream readers and the
named metrics (``app.analysis.llmmetrics``) every surface shows. Every definition of
docs/metrics.md has a row here."""

from __future__ import annotations

import dataclasses
import json
import random
from typing import Any

import numpy as np
import pytest

from app.analysis.llmmetrics import METRIC_NAMES, llm_values
from app.probe.cadence import FOLD_EVERY, Cadence, bucket, buckets
from app.probe.kinds.anthropic import read_anthropic_event
from app.probe.kinds.openai import OpenAIEventReader
from app.probe.readers import Findings, StreamReader, StreamReportedError
from app.probe.sample import Marks

MS = 1_000_000


def chat(delta: dict[str, Any], usage: dict[str, int] | None = None) -> bytes:
    chunk: dict[str, Any] = {"id": "c1", "object": "chat.completion.chunk", "model": "m"}
    chunk["choices"] = [{"index": 0, "delta": delta, "finish_reason": None}]
    if usage is not None:
        chunk["usage"] = usage
    return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"


def usage_only(completion: int, prompt: int = 20, reasoning: int | None = None) -> bytes:
    usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion}
    if reasoning is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    body = {"id": "c1", "object": "chat.completion.chunk", "choices": [], "usage": usage}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def text(word: str) -> bytes:
    return chat({"content": word})


def thought(word: str) -> bytes:
    return chat({"reasoning_content": word})


ROLE = chat({"role": "assistant", "content": ""})
DONE = b"data: [DONE]\n\n"


def claude(kind: str, payload: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **payload})}\n\n".encode()


def claude_delta(kind: str, field: str, value: str) -> bytes:
    return claude("content_block_delta", {"index": 0, "delta": {"type": kind, field: value}})


Reads = list[tuple[float, bytes]]  # (ms from the request's start, the bytes of that read)


def measure(reads: Reads, *, anthropic: bool = False, cut_ms: float | None = None) -> dict:
    """The named metrics of a stream read as ``reads`` (``cut_ms``: cut then, unfinished)."""
    marks, findings = Marks(), Findings()
    events = OpenAIEventReader()
    interpret = read_anthropic_event if anthropic else events
    chunk = None if anthropic else events.answer_chunk
    reader = StreamReader(interpret, marks, findings, 1 << 20, answer_chunk=chunk)
    for at_ms, data in reads:
        reader.feed(data, int(at_ms * MS))
    cut = None if cut_ms is None else int(cut_ms * MS)
    if cut is None:
        reader.close(int(reads[-1][0] * MS))
    total_ms = cut_ms if cut_ms is not None else reads[-1][0]
    stats = findings.cadence.stats(cut)
    details = {
        "tokens": dataclasses.asdict(findings.tokens),
        "stream": None if stats is None else stats.to_json(),
    }
    status = "ok" if cut is None else "deadline_exceeded"
    return {**llm_values(status, total_ms, marks.as_dict(), details), "stream": details["stream"]}


def even(start_ms: float, gap_ms: float, words: int) -> Reads:
    return [(start_ms + i * gap_ms, text(f"w{i}")) for i in range(words)]


CASES: list[tuple[str, Reads, dict[str, Any], dict[str, Any]]] = [
    # (what it shows, the reads, options, the metrics expected: None = absent)
    (
        "steady stream, usage at the end: TPOT = (last - first) / (N - 1)",
        [*even(100, 10, 11), (210, usage_only(11)), (211, DONE)],
        {},
        {"ttft_ms": 100, "ttfat_ms": 100, "tpot_ms": 10, "itl_p50_ms": 10, "itl_max_ms": 10,
         "stall_ms": 10, "output_tokens": 11, "input_tokens": 20, "reasoning_tokens": 0,
         "output_tokens_per_s": 11 / 0.211},
    ),
    (
        "role-only first chunk is no token: TTFT waits for text",
        [(5, ROLE), (100, text("a")), (110, text("b")), (120, text("c")), (121, DONE)],
        {},
        {"ttft_ms": 100, "ttfat_ms": 100, "tpot_ms": 10, "output_tokens": 3,
         "input_tokens": None},
    ),
    (
        "three tokens in one read share its gap: ITL 30/3, the stall the whole 30",
        [(100, text("a")), (130, text("b") + text("c") + text("d")), (140, text("e"))],
        {},
        {"ttft_ms": 100, "itl_p50_ms": 10, "itl_max_ms": 10, "stall_ms": 30,
         "tpot_ms": 10, "output_tokens": 5},
    ),
    (
        "reasoning first: TTFT at the first thought, TTFAT at the first answer word",
        [(50, thought("hm")), (60, thought("so")), (200, text("a")), (210, text("b")),
         (211, usage_only(4, reasoning=2))],
        {},
        {"ttft_ms": 50, "ttfat_ms": 200, "tpot_ms": 160 / 3, "stall_ms": 140,
         "output_tokens": 4, "reasoning_tokens": 2, "itl_max_ms": 140},
    ),
    (
        "reasoning counted by events when the usage block says nothing of it",
        [(50, thought("hm")), (60, thought("so")), (70, text("a"))],
        {},
        {"reasoning_tokens": 2, "output_tokens": 3, "tpot_ms": 10},
    ),
    (
        "a stall mid-stream: its length, where it ended, the tokens before it",
        [*even(100, 5, 4), *even(1115, 5, 4)],
        {},
        {"stall_ms": 1000, "itl_p50_ms": 5, "itl_p90_ms": 1000, "itl_max_ms": 1000,
         "output_tokens": 8, "tpot_ms": 1030 / 7},
    ),
    (
        "cut mid-stream: the stall still going at the cut; no TPOT, ITL or rate",
        [*even(100, 10, 3)],
        {"cut_ms": 2000},
        {"ttft_ms": 100, "stall_ms": 1880, "tpot_ms": None, "itl_p50_ms": None,
         "output_tokens_per_s": None, "output_tokens": 3},
    ),
    (
        "cut before the first token: no TTFT (censored), no stream",
        [(5, ROLE)],
        {"cut_ms": 500},
        {"ttft_ms": None, "ttfat_ms": None, "stall_ms": None, "output_tokens": None},
    ),
    (
        "one token: no gaps, no TPOT",
        [(80, text("a")), (81, usage_only(1)), (82, DONE)],
        {},
        {"ttft_ms": 80, "tpot_ms": None, "stall_ms": None, "itl_p50_ms": None,
         "output_tokens": 1},
    ),
    (
        "usage's count wins over the events' for TPOT (several tokens an event)",
        [(100, text("ab")), (110, text("cd")), (120, text("ef")), (121, usage_only(6))],
        {},
        {"tpot_ms": 4, "output_tokens": 6, "itl_p50_ms": 10},
    ),
    (
        "Anthropic thinking blocks are reasoning, text deltas the answer",
        [(40, claude("message_start", {"message": {"usage": {"input_tokens": 42}}})),
         (90, claude_delta("thinking_delta", "thinking", "hm")),
         (95, claude_delta("signature_delta", "signature", "x")),
         (150, claude_delta("text_delta", "text", "Pong")),
         (160, claude_delta("text_delta", "text", ".")),
         (161, claude("message_delta", {"usage": {"output_tokens": 3}})),
         (162, claude("message_stop", {}))],
        {"anthropic": True},
        {"ttft_ms": 90, "ttfat_ms": 150, "tpot_ms": 35, "input_tokens": 42,
         "output_tokens": 3, "reasoning_tokens": 1, "stall_ms": 60},
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("reads", "options", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_each_named_metric_follows_its_definition(
    reads: Reads, options: dict[str, Any], expected: dict[str, Any]
) -> None:
    found = measure(reads, **options)
    for name, value in expected.items():
        assert name in METRIC_NAMES
        if value is None:
            assert found[name] is None, name
        else:
            # ITL quantiles come from a log-linear histogram: within 1/64 of the gap.
            assert found[name] == pytest.approx(value, rel=1 / 64), name


def test_a_stall_says_where_it_happened() -> None:
    stream = measure([*even(100, 5, 4), *even(1115, 5, 4)])["stream"]
    assert stream["stall_at_ms"] == 1115 and stream["stall_token"] == 4
    assert not stream["stall_open"] and stream["arrivals"] == 8


def test_a_cut_stall_ends_at_the_cut_and_is_open() -> None:
    stream = measure(even(100, 10, 3), cut_ms=2000)["stream"]
    assert stream["stall_at_ms"] == 2000 and stream["stall_token"] == 3 and stream["stall_open"]


def test_an_error_event_mid_stream_keeps_the_tokens_before_it() -> None:
    marks, findings = Marks(), Findings()
    reader = StreamReader(OpenAIEventReader(), marks, findings, 1 << 20)
    reader.feed(text("a"), 10 * MS)
    with pytest.raises(StreamReportedError):
        reader.feed(text("b") + b'event: error\ndata: {"message": "overloaded"}\n\n', 20 * MS)
    stats = findings.cadence.stats()
    assert stats is not None and stats.answer_tokens == 2 and stats.stall_ms == 10


def test_a_whole_answer_has_token_counts_but_no_stream_timing() -> None:
    details = {"tokens": {"prompt": 9, "completion": 4, "reasoning": None}, "stream": None}
    marks = {"first_answer_token": 50 * MS, "last_answer_token": 50 * MS}
    found = llm_values("ok", 100.0, marks, details)
    assert found["ttft_ms"] is None and found["tpot_ms"] is None and found["stall_ms"] is None
    assert found["output_tokens"] == 4 and found["input_tokens"] == 9
    assert found["output_tokens_per_s"] == pytest.approx(40)


def test_an_old_sample_without_stream_details_reads_as_no_metrics() -> None:
    found = llm_values("ok", 100.0, {}, {})
    assert set(found) == set(METRIC_NAMES) and all(v is None for v in found.values())


@pytest.mark.parametrize("seed", range(5))
def test_itl_quantiles_are_within_their_bucket_of_the_exact_ones(seed: int) -> None:
    rng = random.Random(seed)
    gaps = [int(rng.lognormvariate(16, 1.5)) + 1 for _ in range(rng.randint(2, 3000))]
    cadence, now = Cadence(), 0
    cadence.arrive(now, 1, 0)
    for gap in gaps:
        now += gap
        cadence.arrive(now, 1, 0)
    stats = cadence.stats()
    assert stats is not None
    ordered = sorted(gaps)
    for name, percent in (("p50", 50), ("p90", 90)):
        exact = ordered[max(1, -(-percent * len(gaps) // 100)) - 1] / 1e6  # nearest rank
        assert stats.itl_ms[name] == pytest.approx(exact, rel=1 / 64)
    assert stats.itl_ms["max"] == max(gaps) / 1e6 and stats.stall_ms == max(gaps) / 1e6


def test_the_histogram_stays_bounded_whatever_the_gaps() -> None:
    cadence, now, rng = Cadence(), 0, random.Random(1)
    for _ in range(20_000):
        now += rng.randrange(1, 1 << 40)
        cadence.arrive(now, rng.randint(1, 3), 0)
    assert cadence.histogram is not None and cadence.histogram.nbytes <= 17_000
    assert len(cadence.stamps) < FOLD_EVERY


def test_the_gaps_are_bucketed_at_once_as_one_by_one() -> None:
    rng = random.Random(3)
    edges = [0, 1, 31, 32, 33, 63, 64, 65, *(2**k + d for k in range(6, 52) for d in (-1, 0, 1))]
    gaps = edges + [rng.randrange(1 << rng.randrange(1, 50)) for _ in range(5000)]
    found = buckets(np.array(gaps, dtype=np.int64)).tolist()
    assert found == [bucket(gap) for gap in gaps]


def test_a_long_stream_folds_in_pieces_to_the_same_summary_as_read_whole() -> None:
    """Its longest stall falls in the third fold; reads of three tokens cross the folds."""
    rng, now, reads = random.Random(4), 0, []
    for i in range(3 * FOLD_EVERY + 17):
        now += (
            5_000_000 + rng.randrange(1_000_000) + (900_000_000 if i == 2 * FOLD_EVERY + 5 else 0)
        )
        reads.append((now, 3 if i % 7 == 0 else 1, 1 if i % 11 == 0 else 0))
    pieces, whole = Cadence(), Cadence()
    for at, answer, reasoning in reads:
        pieces.arrive(at, answer, reasoning)
    whole.stamps.extend(at for at, _, _ in reads)
    whole.several.update({i: a + r for i, (_, a, r) in enumerate(reads) if a + r != 1})
    whole.reasoning = sum(r for _, _, r in reads)
    assert pieces.stats() == whole.stats()
    stats = pieces.stats()
    assert stats is not None and stats.stall_at_ms == reads[2 * FOLD_EVERY + 5][0] / 1e6
    tokens_before = sum(a + r for _, a, r in reads[: 2 * FOLD_EVERY + 5])
    assert stats.stall_token == tokens_before and stats.arrivals == len(reads)
