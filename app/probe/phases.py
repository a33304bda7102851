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
# A server's time before its headers is believed when the network it leaves of the time to
# headers is at most two round trips (request out and answer back, and a second for what
# one segment does not carry) plus the 1 ms resolution of the integer-ms headers
# (openai-processing-ms). More, and the server counted only part of its work: llama.cpp's
# streams count only building the response object, not the pre-header work before it, which
# would have been "network" against a loopback round trip far shorter (bench.real_servers).
PLAUSIBLE_RTTS = 2.0
RESOLUTION_MS = 1.0
# Flags a breakdown can raise on its sample.
IGNORED = "server_timing_ignored"  # zero, or leaving an implausible network: not used
CLAMPED = "server_timing_clamped"  # more than we measured: scaled or cut to fit


@dataclass(frozen=True, slots=True)
class Breakdown:
    phases: dict[str, float]
    provenance: dict[str, Provenance]
    unsplit: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()


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


def trusted_processing(
    processing_ms: float | None, ttfb_ms: float | None, rtt_ms: float | None
) -> tuple[float | None, tuple[str, ...]]:
    """The server's time before its headers, if it can be believed next to the time to
    headers and the round trip we measured; else None, flagged ``IGNORED``.

    Zero is never an account of a server's work (``openai-processing-ms: 0`` on llama.cpp's
    streams, ``Server-Timing: total;dur=0``). One that leaves more network than
    ``PLAUSIBLE_RTTS`` round trips (plus the headers' resolution) left work out.
    """
    if processing_ms is None:
        return None, ()
    if processing_ms <= 0:
        return None, (IGNORED,)
    if ttfb_ms is not None and rtt_ms is not None:
        if ttfb_ms - processing_ms > PLAUSIBLE_RTTS * rtt_ms + RESOLUTION_MS:
            return None, (IGNORED,)
    return processing_ms, ()


def estimate_network(
    available_ms: float, ttfb_ms: float | None, processing_ms: float | None, rtt_ms: float | None
) -> tuple[float, Provenance, tuple[str, ...]]:
    """Network share of a head segment when the server did not account for all of it.

    The server's own time before its headers (``processing_ms``, already judged by
    ``trusted_processing``) beats a round-trip estimate: time to first byte minus it is
    what the wire took. Flagged ``CLAMPED`` when it is more than the time to first byte.
    """
    flags: tuple[str, ...] = ()
    if processing_ms is not None and ttfb_ms is not None:
        network, provenance = ttfb_ms - processing_ms, M
        flags = (CLAMPED,) if network < 0 else ()
    elif rtt_ms is not None:
        network, provenance = rtt_ms, E
    else:
        network, provenance = 0.0, E
    return min(max(network, 0.0), available_ms), provenance, flags


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
    flags: tuple[str, ...] = ()
    if reported > head_ms:
        # Clocks disagree (or the server counts its own receive): fit the server's
        # split into what we measured rather than invent negative network time.
        scale = head_ms / reported
        known = {name: ms * scale for name, ms in known.items()}
        reported, flags = head_ms, (CLAMPED,)
    if not unknown:
        phases = {"network": head_ms - reported, **known}
        provenance = {"network": M} | dict.fromkeys(known, S)
        return Breakdown(phases, provenance, flags=flags)
    network_ms, network_provenance = network or (0.0, E)
    network_ms = min(network_ms, head_ms - reported)
    rest = head_ms - reported - network_ms
    phases = {"network": network_ms, **known, unknown[0]: rest}
    phases |= dict.fromkeys(unknown[1:], 0.0)
    provenance = {"network": network_provenance} | dict.fromkeys(known, S)
    provenance |= dict.fromkeys(unknown, E)
    unsplit = tuple(unknown) if len(unknown) > 1 else ()
    return Breakdown(phases, provenance, unsplit, flags)


def llm_phases(
    marks: Marks,
    end_ns: int,
    server: ServerTiming,
    rtt_ms: float | None,
    *,
    streaming: bool,
) -> Breakdown:
    """connect | network, queue, prefill | generation | transfer.

    A whole (non-streaming) answer whose server did not say how long it generated is
    connect | network, server | transfer: its queue, prefill and generation all happened
    before the first byte and nothing tells them apart.
    """
    if not streaming and server.generation_ms is None:
        return whole_answer_phases(marks, end_ns, server, rtt_ms)
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
    head_ms, ttfb_ms = _ms(first - connected), _ttfb_ms(marks, connected, end_ns)
    processing, ignored = trusted_processing(server.processing_ms, ttfb_ms, rtt_ms)
    network_ms, network_provenance, clamped = estimate_network(head_ms, ttfb_ms, processing, rtt_ms)
    head = split_head(head_ms, components, (network_ms, network_provenance))
    phases = {"connect": _ms(connected), **head.phases}
    provenance = {"connect": M, **head.provenance}
    if streaming:
        phases["generation"], provenance["generation"] = _ms(last - first), M
    phases["transfer"], provenance["transfer"] = _ms(end_ns - last), M
    order = ("connect", "network", "queue", "prefill", "generation", "transfer")
    flags = _flags(ignored, clamped, head.flags)
    return Breakdown({k: phases[k] for k in order}, provenance, head.unsplit, flags)


def whole_answer_phases(
    marks: Marks, end_ns: int, server: ServerTiming, rtt_ms: float | None
) -> Breakdown:
    """connect | network, server | transfer, for an answer sent whole after the server's
    work: ``server`` is what the head holds beyond the network (``docs/phases.md``)."""
    connected = _cut(marks.request_start, 0, end_ns)
    first = _cut(marks.first_byte, connected, end_ns)
    head_ms, ttfb_ms = _ms(first - connected), _ttfb_ms(marks, connected, end_ns)
    processing, ignored = trusted_processing(server.processing_ms, ttfb_ms, rtt_ms)
    network_ms, network_provenance, clamped = estimate_network(head_ms, ttfb_ms, processing, rtt_ms)
    server_provenance = S if network_provenance is M else E
    return Breakdown(
        {
            "connect": _ms(connected),
            "network": network_ms,
            "server": head_ms - network_ms,
            "transfer": _ms(end_ns - first),
        },
        {"connect": M, "network": network_provenance, "server": server_provenance, "transfer": M},
        flags=_flags(ignored, clamped),
    )


def http_phases(marks: Marks, end_ns: int, server: ServerTiming, rtt_ms: float | None) -> Breakdown:
    """connect | network, server | transfer.

    Redirects are the server's time: from the first request to the final one, every hop
    (its round trips, its work, any new connection) is added to what the final server
    reported; with nothing reported, server is the rest of the head and holds them anyway.
    """
    connected = _cut(marks.request_start, 0, end_ns)
    headers = _cut(marks.response_headers, connected, end_ns)
    # The final request's start: the first one's, or the redirects' end.
    final = (
        connected if marks.redirect_end is None else _cut(marks.redirect_end, connected, headers)
    )
    processing, ignored = trusted_processing(server.processing_ms, _ms(headers - final), rtt_ms)
    reported = [
        ms for ms in (server.queue_ms, server.prefill_ms, server.generation_ms) if ms is not None
    ]
    server_ms = processing
    if server_ms is None and reported:
        server_ms = sum(reported)
    if server_ms is not None and marks.redirect_end is not None:
        server_ms += _ms(final - connected)
    head_ms = _ms(headers - connected)
    # The round trip is the final request's: no longer than it took, whatever the hops did.
    network_ms, network_provenance, _ = estimate_network(_ms(headers - final), None, None, rtt_ms)
    head = split_head(head_ms, {"server": server_ms}, (network_ms, network_provenance))
    phases = {"connect": _ms(connected), **head.phases, "transfer": _ms(end_ns - headers)}
    provenance = {"connect": M, **head.provenance, "transfer": M}
    return Breakdown(phases, provenance, flags=_flags(ignored, head.flags))


def _ttfb_ms(marks: Marks, connected: int, end_ns: int) -> float | None:
    if marks.response_headers is None:
        return None
    return _ms(_cut(marks.response_headers, connected, end_ns) - connected)


def _flags(*groups: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(flag for group in groups for flag in group))
