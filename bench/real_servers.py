"""phasewatch against real servers: each server's own account of every request, and an
independent raw-socket client (tests/real/rawclient.py) turn about with phasewatch.

Run from the repository root (llama.cpp needs an interpreter with its wheel):
``PHASEWATCH_LLM_PYTHON=… .venv/bin/python -m bench.real_servers [--samples 30]``.

Per scenario and phase: phasewatch's p50 and p90, the reference's, the median of the
per-request differences where the server accounts for each request (else the difference
of the medians against the raw client), and whether it is within max(2 ms, 3 %).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from app.analysis.llmmetrics import sample_llm_values
from app.probe.client import make_client, probe_once
from app.probe.sample import Sample, Status
from app.probe.spec import Kind, ProbeSpec
from app.store.records import SampleRecord
from bench.common import RunClock, pct, print_header, print_table
from tests.real.llama import LlamaServer, Perf, chat_body, prompt, running_llama
from tests.real.nginx import Logged, Nginx, running_nginx
from tests.real.rawclient import RawAnswer, RawClient

HEADERS = [
    "phase",
    "phasewatch p50",
    "p90",
    "account p50",
    "p90",
    "phasewatch − account",
    "raw − account",
    "phasewatch − raw",
    "goal",
    "met?",
]
Row = list[str]


def row(
    phase: str,
    ours: Sequence[float],
    theirs: Sequence[float],
    ours_ref: Sequence[float] = (),
    theirs_ref: Sequence[float] | None = None,
) -> Row:
    """One phase: phasewatch and the raw client each less the reference for their own
    requests (the server's account of each; ``theirs_ref`` None: no account, the medians
    of both clients compared). Met when phasewatch is within max(2 ms, 3 %) of the account,
    or, where it is not, within that of the raw client: the rest is the server's own (its
    handling outside its account), which any client sees."""
    if theirs_ref is None:
        mine = other = 0.0
        between = statistics.median(ours) - statistics.median(theirs)
        ref = list(theirs)
    else:
        mine = statistics.median(a - b for a, b in zip(ours, ours_ref, strict=True))
        other = statistics.median(a - b for a, b in zip(theirs, theirs_ref, strict=True))
        between, ref = mine - other, list(ours_ref)
    goal = max(2.0, 0.03 * statistics.median(ref))
    quantiles = [f"{pct(values, q):.2f}" for values in (ours, ref) for q in (50, 90)]
    if theirs_ref is not None and abs(mine) <= goal:
        met = "yes"
    elif abs(between) <= goal:
        met = "yes, vs raw" if theirs_ref is None else "the server's: yes vs raw"
    else:
        met = "**no**"
    account = [f"{mine:+.2f}", f"{other:+.2f}"] if theirs_ref is not None else ["", ""]
    return [phase, *quantiles, *account, f"{between:+.2f}", f"±{goal:.2f}", met]


def server_side(sample: Sample) -> float:
    return sum(v for k, v in sample.phases.items() if k in ("queue", "prefill", "generation"))


async def turn_about(
    spec: ProbeSpec, raw: Callable[[], RawAnswer], n: int
) -> tuple[list[Sample], list[RawAnswer]]:
    """``n`` requests each, phasewatch then the raw client, after one of each to warm up."""
    ours, theirs = [], []
    async with make_client(spec) as client:
        for index in range(n + 1):
            ours.append(await probe_once(client, spec, index))
            theirs.append(await asyncio.to_thread(raw))
    assert all(s.status is Status.OK for s in ours), [s.error for s in ours]
    return ours[1:], theirs[1:]


async def llama_whole(server: LlamaServer, n: int) -> list[Row]:
    body = chat_body(prompt(8), 128, stream=False)
    spec = ProbeSpec(url=server.chat_url, kind=Kind.OPENAI, method="POST", body=body)
    raw = RawClient(server.url)
    before = len(server.perf())
    ours, theirs = await turn_about(spec, lambda: raw.post_json("/v1/chat/completions", body), n)
    raw.close()
    perf = server.wait_for(before + 2 * (n + 1))[before + 2 :]
    mine, other = _totals(perf[::2]), _totals(perf[1::2])
    processing = [s.server_timing.raw["openai-processing-ms"] for s in ours]
    raw_processing = [float(a.headers["openai-processing-ms"]) for a in theirs]
    server = [s.phases["server"] for s in ours]
    raw_server = [a.head_ms for a in theirs]
    return [
        row("server vs openai-processing-ms", server, raw_server, processing, raw_processing),
        row("server vs llama total", server, raw_server, mine, other),
        row("after connect vs llama total", _after_connect(ours), _ends(theirs), mine, other),
    ]


async def llama_stream(server: LlamaServer, n: int, words: int, tokens: int) -> list[Row]:
    nonce = "{{nonce}} " if words > 100 else ""
    body = chat_body(nonce + prompt(words), tokens, stream=True)
    spec = ProbeSpec(url=server.chat_url, kind=Kind.OPENAI, method="POST", body=body)
    raw = RawClient(server.url)
    before = len(server.perf())
    ours, theirs = await turn_about(spec, lambda: raw.post_json("/v1/chat/completions", body), n)
    raw.close()
    perf = server.wait_for(before + 2 * (n + 1))[before + 2 :]
    mine, other = _totals(perf[::2]), _totals(perf[1::2])
    head = [s.phases["network"] + s.phases["queue"] + s.phases["prefill"] for s in ours]
    first = [a.first_token_ms or 0.0 for a in theirs]
    generation = [s.phases["generation"] for s in ours]
    last = [a.last_token_ms or 0.0 for a in theirs]
    # Each request runs at the server's pace of the moment, which varies by half from one
    # to the next: the phase that holds most of llama.cpp's total is compared less it.
    if words > 100:  # the prefill's
        head_row = row("first token vs llama total", head, first, mine, other)
        generation_row = row("generation", generation, _raw_gen(theirs))
    else:  # the generation's
        head_row = row("first token", head, first)
        generation_row = row("generation vs llama total", generation, _raw_gen(theirs), mine, other)
    transfer = [end - at for end, at in zip(_ends(theirs), last, strict=True)]
    return [
        row("after connect vs llama total", _after_connect(ours), _ends(theirs), mine, other),
        head_row,
        generation_row,
        row("transfer", [s.phases["transfer"] for s in ours], transfer),
    ]


TOKEN_HEADERS = ["metric", "phasewatch p50", "p90", "llama p50", "p90", "median difference",
                 "goal", "met?"]  # fmt: skip


async def llama_tokens(
    server: LlamaServer, n: int, tokens: int, words: int
) -> tuple[list[Row], list[Row]]:
    """TPOT and the server's part of TTFT against llama.cpp's own perf lines, request by
    request (issue 39), phasewatch and the raw client turn about: TPOT ≈ its eval time / its
    eval runs (the tokens after the first); TTFT less connect ≈ its prompt eval time (a fresh
    nonce first in every request of both clients, so no prompt is cached; one request at a
    time, so no queue). The server spends some time outside that account (tokenizing the
    prompt, the first token's sampling and event): any client sees it, so where phasewatch
    is off the account it is judged against the raw client's own difference."""
    text = prompt(words)
    body = chat_body("{{nonce}} " + text, tokens, stream=True)
    spec = ProbeSpec(url=server.chat_url, kind=Kind.OPENAI, method="POST", body=body)

    def raw_request() -> RawAnswer:
        # A connection of its own each time (timed from the request's first byte): a
        # kept-alive one idles past the server's keep-alive while phasewatch's turn runs.
        fresh = chat_body(f"{uuid.uuid4().hex} {text}", tokens, stream=True)
        raw = RawClient(server.url)
        try:
            return raw.post_json("/v1/chat/completions", fresh)
        finally:
            raw.close()

    before = len(server.perf())
    ours, theirs = await turn_about(spec, raw_request, n)
    perf = server.wait_for(before + 2 * (n + 1))[before + 2 :]
    mine, other = perf[::2], perf[1::2]
    values = [sample_llm_values(SampleRecord.from_sample(s)) for s in ours]
    tpot = [v["tpot_ms"] or 0.0 for v in values]
    their_tpot = [(p.total_ms - p.prompt_ms) / max(p.eval_runs, 1) for p in mine]
    after_connect = [
        (v["ttft_ms"] or 0.0) - s.phases["connect"] for v, s in zip(values, ours, strict=True)
    ]
    first = row(
        "TTFT − connect vs prompt eval",
        after_connect,
        [a.first_token_ms or 0.0 for a in theirs],
        [p.prompt_ms for p in mine],
        [p.prompt_ms for p in other],
    )
    return [token_row("TPOT vs eval ms / runs", tpot, their_tpot)], [first]


def token_row(metric: str, ours: Sequence[float], theirs: Sequence[float]) -> Row:
    between = statistics.median(a - b for a, b in zip(ours, theirs, strict=True))
    goal = max(2.0, 0.03 * statistics.median(theirs))
    quantiles = [f"{pct(values, q):.2f}" for values in (ours, theirs) for q in (50, 90)]
    met = "yes" if abs(between) <= goal else "**no**"
    return [metric, *quantiles, f"{between:+.2f}", f"±{goal:.2f}", met]


async def nginx_app(nginx: Nginx, n: int, path: str) -> list[Row]:
    spec = ProbeSpec(url=f"{nginx.url}{path}")
    raw = RawClient(nginx.url)
    ours, theirs = await turn_about(spec, lambda: raw.get(path), n)
    raw.close()
    mine = nginx.logged([s.request_id for s in ours])
    other = nginx.logged([a.headers.get("x-request-id") for a in theirs])
    raw_head = [a.head_ms for a in theirs]
    return [
        row(
            "after connect vs $request_time",
            _after_connect(ours),
            _ends(theirs),
            _request(mine),
            _request(other),
        ),
        row(
            "network+server vs $upstream_header_time",
            [s.phases["network"] + s.phases["server"] for s in ours],
            raw_head,
            _upstream(mine),
            _upstream(other),
        ),
        row(
            "server vs $upstream_header_time",
            [s.phases["server"] for s in ours],
            raw_head,
            _upstream(mine),
            _upstream(other),
        ),
        row(
            "transfer vs $request_time − $upstream_header_time",
            [s.phases["transfer"] for s in ours],
            [a.end_ms - a.head_ms for a in theirs],
            _sent(mine),
            _sent(other),
        ),
    ]


def _totals(perf: Sequence[Perf]) -> list[float]:
    return [p.total_ms for p in perf]


def _request(logged: Sequence[Logged]) -> list[float]:
    return [line.request_ms for line in logged]


def _upstream(logged: Sequence[Logged]) -> list[float]:
    return [line.upstream_header_ms or 0.0 for line in logged]


def _sent(logged: Sequence[Logged]) -> list[float]:
    return [line.request_ms - (line.upstream_header_ms or 0.0) for line in logged]


def _ends(answers: Sequence[RawAnswer]) -> list[float]:
    return [a.end_ms for a in answers]


def _after_connect(samples: Sequence[Sample]) -> list[float]:
    return [s.total_ms - s.phases["connect"] for s in samples]


def _raw_gen(answers: Sequence[RawAnswer]) -> list[float]:
    return [(a.last_token_ms or 0) - (a.first_token_ms or 0) for a in answers]


async def main(samples: int) -> None:
    print_header("real servers", "phasewatch vs each server's account vs a raw-socket client")
    clock = RunClock()
    work = Path(tempfile.mkdtemp())
    with running_llama(work) as llama:
        scenarios = {
            "llama.cpp, whole answers of 128 tokens": llama_whole(llama, samples),
            "llama.cpp, streams of 64 tokens, short prompt": llama_stream(llama, samples, 8, 64),
            "llama.cpp, streams of 8 tokens, 1,200-token prompt with {{nonce}}": llama_stream(
                llama, max(samples // 2, 5), 400, 8
            ),
        }
        for title, scenario in scenarios.items():
            print(f"\n### {title}\n")
            print_table(HEADERS, await scenario)
        print("\n### llama.cpp, TPOT and TTFT against its perf lines, 64 tokens\n")
        per_token, first_token = await llama_tokens(llama, samples, 64, 400)
        print_table(TOKEN_HEADERS, per_token)
        print()
        print_table(HEADERS, first_token)
    with running_nginx(work) as nginx:
        for title, path in {
            "nginx, proxied 30 ms upstream, 2 KB": "/app/work?ms=30&bytes=2000",
            "nginx, limit_rate 500k, 150 KB": "/slow/work?ms=5&bytes=150000",
        }.items():
            print(f"\n### {title}\n")
            print_table(HEADERS, await nginx_app(nginx, samples if "30" in path else 5, path))
    print(f"\n{clock.report()}")


async def tokens_only(samples: int) -> None:
    print_header("real servers", "TPOT and TTFT against llama.cpp's perf lines")
    clock = RunClock()
    with running_llama(Path(tempfile.mkdtemp())) as llama:
        per_token, first_token = await llama_tokens(llama, samples, 64, 400)
        print_table(TOKEN_HEADERS, per_token)
        print()
        print_table(HEADERS, first_token)
    print(f"\n{clock.report()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--only-tokens", action="store_true", help="the TPOT/TTFT table alone")
    args = parser.parse_args()
    asyncio.run(tokens_only(args.samples) if args.only_tokens else main(args.samples))
