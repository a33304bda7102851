"""A run: N samples in sequence over one pooled client, as a production client sends them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx

from app import clock
from app.probe.client import make_client, probe_once, warm_up
from app.probe.rtt import Earlier, fastest
from app.probe.sample import Sample, Status
from app.probe.spec import ProbeSpec, RttMethod
from app.probe.trace import TraceRecorder


async def probe_run(
    spec: ProbeSpec,
    samples: int,
    *,
    spacing_s: float = 0.0,
    idle_since: float | None = None,
    on_sample: Callable[[Sample], None] | None = None,
    client: httpx.AsyncClient | None = None,
) -> list[Sample]:
    """Probe ``spec`` ``samples`` times, one after the other.

    ``idle_since`` is the monotonic time the target was last probed (None: never, as far
    as we know); the first sample after ``cold_after_idle_s`` of quiet is a cold start.
    """
    own_client = client is None
    client = client or make_client(spec)
    try:
        await warm_up()
        rtt_ms = await _ttfb_rtt(client, spec) if spec.rtt_method is RttMethod.TTFB else None
        cold = idle_since is None or clock.monotonic() - idle_since >= spec.cold_after_idle_s
        results: list[Sample] = []
        earlier = Earlier()
        for index in range(samples):
            if index:
                await _pause(spec, spacing_s, results[-1])
            sample = await probe_once(
                client, spec, index, rtt_ms=rtt_ms, earlier=earlier, cold_start=cold and not index
            )
            earlier = earlier.after(sample)
            results.append(sample)
            if on_sample is not None:
                on_sample(sample)
        return results
    finally:
        if own_client:
            await client.aclose()


async def _pause(spec: ProbeSpec, spacing_s: float, last: Sample) -> None:
    """The spacing between samples; after a cut, at least the cool-down: a server that
    keeps working on a request its client cancelled (llama.cpp does, for a whole answer)
    would otherwise bill the next sample for it, as queue."""
    pause = spacing_s
    if last.status in (Status.DEADLINE_EXCEEDED, Status.TIMEOUT):
        pause = max(pause, spec.cooldown_after_cut_s)
    if pause > 0:
        await asyncio.sleep(pause)


async def _ttfb_rtt(client: httpx.AsyncClient, spec: ProbeSpec) -> float | None:
    """Fastest time to first byte of a trivial request: a round trip plus the least work."""
    url = spec.rtt_url or str(httpx.URL(spec.url).copy_with(path="/", query=None))
    return fastest([await _ttfb_once(client, url, spec.cutoff_s) for _ in range(spec.rtt_probes)])


async def _ttfb_once(client: httpx.AsyncClient, url: str, cutoff_s: float) -> float | None:
    recorder = TraceRecorder(clock.now_ns())
    try:
        async with asyncio.timeout(cutoff_s):
            request = client.build_request("GET", url, extensions={"trace": recorder})
            await client.send(request)
    except Exception:  # an estimate that fails is no estimate, not a failed run
        return None
    marks = recorder.marks
    if marks.request_start is None or marks.response_headers is None:
        return None
    return (marks.response_headers - marks.request_start) / 1e6
