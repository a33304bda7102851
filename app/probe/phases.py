"""Marks -> phases. Pure: plain values in, plain values out. docs/phases.md has the formulas.

Every phase is a slice of one time line from the request start to ``end_ns`` (stream end,
the moment of failure, or the deadline for a censored sample), so the phases add up to
the end-to-end time exactly. A mark that was never reached is taken as ``end_ns``: the
phases after it are zero and the phase the request was in holds the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.probe.sample import Marks, Provenance, ServerTiming

_NS_PER_MS = 1_000_000
M = Provenance.MEASURED
S = Provenance.SERVER
E = Provenance.ESTIMATED


@dataclass(frozen=True, slots=True)
class Breakdown:
    phases: dict[str, float]
    provenance: dict[str, Provenance]
    unsplit: tuple[str, ...] = ()


def _cut(mark: int | None, floor: int, end: int) -> int:
    return end if mark is None else min(max(mark, floor), end)


def _ms(ns: int) -> float:
    return ns / _NS_PER_MS


def _first(*marks: int | None) -> int | None:
    present = [m for m in marks if m is not None]
    return min(present) if present else None


def _last(*marks: int | None) -> int | None:
    present = [m for m in marks if m is not None]
    return max(present) if present else None


def estimate_network(
    available_ms: float, ttfb_ms: float | None, server: ServerTiming, rtt_ms: float | None
) -> tuple[float, Provenance]:
    """Network share of a head segment when the server did not account for all of it.

    The server's own time before its headers (``processing_ms``) beats a round-trip
    estimate: time to first byte minus it is what the wire took.
    """
    if server.processing_ms is not None and ttfb_ms is not None:
        network, provenance = ttfb_ms - server.processing_ms, M
    elif rtt_ms is not None:
        network, provenance = rtt_ms, E
    else:
        network, provenance = 0.0, E
    return min(max(network, 0.0), available_ms), provenance


def split_head(
    head_ms: float,
    components: dict[str, float | None],
    network: tuple[float, Provenance] | None,
) -> Breakdown:
    """Split the time from request start to first token into network + server components.

    ``components`` maps each server-side phase inside the head to what the server
    reported (None: not reported). ``network`` is the estimate to use when the server did
    not report every component; when it did, network is what is left of the head.
    """
    known = {name: ms for name, ms in components.items() if ms is not None}
    unknown = [name for name, ms in components.items() if ms is None]
    reported = sum(known.values())
    if reported > head_ms:
        # Clocks disagree (or the server counts its own receive): fit the server's
        # split into what we measured rather than invent negative network time.
        scale = head_ms / reported
        known = {name: ms * scale for name, ms in known.items()}
        reported = head_ms
    if not unknown:
        phases = {"network": head_ms - reported, **known}
        provenance = {"network": M} | dict.fromkeys(known, S)
        return Breakdown(phases, provenance)
    network_ms, network_provenance = network or (0.0, E)
    network_ms = min(network_ms, head_ms - reported)
    rest = head_ms - reported - network_ms
    phases = {"network": network_ms, **known, unknown[0]: rest}
    phases |= dict.fromkeys(unknown[1:], 0.0)
    provenance = {"network": network_provenance} | dict.fromkeys(known, S)
    provenance |= dict.fromkeys(unknown, E)
    return Breakdown(phases, provenance, tuple(unknown) if len(unknown) > 1 else ())


def llm_phases(
    marks: Marks,
    end_ns: int,
    server: ServerTiming,
    rtt_ms: float | None,
    *,
    streaming: bool,
) -> Breakdown:
    """connect | network, queue, prefill | generation | transfer."""
    connected = _cut(marks.request_start, 0, end_ns)
    if streaming:
        first = _cut(
            _first(marks.first_reasoning_token, marks.first_answer_token), connected, end_ns
        )
        last_token = _last(marks.last_reasoning_token, marks.last_answer_token)
        if marks.stream_end is None:
            # Cut (deadline, failure) while tokens were flowing: it was still generating.
            last_token = None
        last = _cut(last_token, first, end_ns)
    else:
        # The whole answer arrives at once: generation happened before the first byte.
        first = last = _cut(marks.first_byte, connected, end_ns)
    components: dict[str, float | None] = {"queue": server.queue_ms, "prefill": server.prefill_ms}
    if not streaming:
        components["generation"] = server.generation_ms
    head_ms = _ms(first - connected)
    network = estimate_network(head_ms, _ttfb_ms(marks, connected, end_ns), server, rtt_ms)
    head = split_head(head_ms, components, network)
    phases = {"connect": _ms(connected), **head.phases}
    provenance = {"connect": M, **head.provenance}
    if streaming:
        phases["generation"], provenance["generation"] = _ms(last - first), M
    phases["transfer"], provenance["transfer"] = _ms(end_ns - last), M
    order = ("connect", "network", "queue", "prefill", "generation", "transfer")
    return Breakdown({k: phases[k] for k in order}, provenance, head.unsplit)


def http_phases(marks: Marks, end_ns: int, server: ServerTiming, rtt_ms: float | None) -> Breakdown:
    """connect | network, server | transfer.

    Redirects are the server's time: from the first request to the final one, every hop
    (its round trips, its work, any new connection) is added to what the final server
    reported; with nothing reported, server is the rest of the head and holds them anyway.
    """
    connected = _cut(marks.request_start, 0, end_ns)
    headers = _cut(marks.response_headers, connected, end_ns)
    reported = [
        ms for ms in (server.queue_ms, server.prefill_ms, server.generation_ms) if ms is not None
    ]
    server_ms = server.processing_ms
    if server_ms is None and reported:
        server_ms = sum(reported)
    if server_ms is not None and marks.redirect_end is not None:
        server_ms += _ms(_cut(marks.redirect_end, connected, headers) - connected)
    head_ms = _ms(headers - connected)
    network = estimate_network(head_ms, None, ServerTiming(), rtt_ms)
    head = split_head(head_ms, {"server": server_ms}, network)
    phases = {"connect": _ms(connected), **head.phases, "transfer": _ms(end_ns - headers)}
    provenance = {"connect": M, **head.provenance, "transfer": M}
    return Breakdown(phases, provenance)


def _ttfb_ms(marks: Marks, connected: int, end_ns: int) -> float | None:
    if marks.response_headers is None:
        return None
    return _ms(_cut(marks.response_headers, connected, end_ns) - connected)
