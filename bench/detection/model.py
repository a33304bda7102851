"""The latency model: per-run phase medians in, samples with phases and outcomes out.

A *series* is one target seen from one vantage: a run every interval, each of a few
samples one after the other on one connection. Every phase of a sample is its run's
median × a run factor (shared by the run's samples: the server's load at that moment)
× a sample factor, both lognormal, and the load phase (queue, or server for plain HTTP)
× the target's *shared load* at that run: an AR(1) process over runs times a per-day
level, the same at every vantage (the server is one), so neighbouring runs are slow
together and one day is busier than the next. On top: a right tail on the load phase (queue, or
server for plain HTTP) in a share of samples, cold starts on the first sample of a run,
rare outliers, rare failures, and the client's deadline, which censors a sample at the
deadline (the phase it was in holds the rest, later phases are 0; docs/phases.md).

Scenarios shape the per-run arrays (``medians``, ``tail_p`` ...); ``draw`` does the rest.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray
from scipy.signal import lfilter

Floats = NDArray[np.float64]
Ints = NDArray[np.int64]

LLM_PHASES = ("network", "queue", "prefill", "generation", "transfer")
HTTP_PHASES = ("network", "server", "transfer")
# (run sigma, sample sigma) of each phase's lognormal factors.
SIGMAS = {
    "network": (0.03, 0.05),
    "queue": (0.25, 0.35),
    "server": (0.20, 0.30),
    "prefill": (0.08, 0.10),
    "generation": (0.08, 0.12),
    "transfer": (0.30, 0.30),
}
STATUS_OK, STATUS_HTTP_ERROR, STATUS_DEADLINE, STATUS_ERROR = range(4)
STATUS_NAMES = ("ok", "http_error", "deadline_exceeded", "error")
MICROS = 1_000_000


@dataclass(frozen=True, slots=True)
class Profile:
    """A target's steady state. ``rtt_ms`` is per vantage; the rest is the server's."""

    kind: str  # openai | http
    rtt_ms: dict[str, float]
    server_ms: dict[str, float]  # queue/prefill/generation/transfer, or server/transfer
    daily_amplitude: float = 0.3  # of the load phase: 1 ± this over the day
    peak_hour: float = 15.0
    weekend_factor: float = 0.85  # load on Saturdays and Sundays
    deadline_ms: float | None = None
    tail_p: float = 0.02  # share of samples with an extra right tail on the load phase
    tail_scale: float = 1.0  # × the load median: the tail's scale
    cold_p: float = 0.01  # per run: the first sample waits for a cold start
    cold_ms: float = 1200.0
    outlier_p: float = 0.003
    error_p: float = 0.002

    @property
    def phases(self) -> tuple[str, ...]:
        return LLM_PHASES if self.kind != "http" else HTTP_PHASES

    @property
    def load_phase(self) -> str:
        return "queue" if self.kind != "http" else "server"

    def medians(self, vantage: str) -> dict[str, float]:
        return {"network": self.rtt_ms[vantage], **self.server_ms}


@dataclass(slots=True)
class Series:
    """Per-run arrays of one target at one vantage; scenarios edit them before ``draw``."""

    target: str
    vantage: str
    profile: Profile
    starts: Ints  # run start, microseconds since the epoch
    medians: Floats  # runs × phases (profile.phases order)
    run_sigma: Floats  # runs × phases
    sample_sigma: Floats  # runs × phases
    tail_p: Floats
    tail_scale_ms: Floats
    cold_p: Floats
    cold_ms: Floats
    error_p: Floats
    slow: Floats = field(default_factory=lambda: np.empty(0))  # × the load phase (bad runs)

    @property
    def phases(self) -> tuple[str, ...]:
        return self.profile.phases

    def column(self, phase: str) -> int:
        return self.phases.index(phase)


@dataclass(frozen=True, slots=True)
class Drawn:
    """Samples of one series: runs × samples (× phases with ``connect`` first)."""

    series: Series
    run_ids: list[str]
    started: Ints  # µs since the epoch
    status: NDArray[np.int8]
    total: Floats
    phases: Floats
    phase_names: tuple[str, ...]


def load_cycle(starts: Ints, amplitude: float, peak_hour: float, weekend: float) -> Floats:
    """The load phase's multiplier at each run: a daily cycle, lighter at weekends."""
    seconds = starts / MICROS
    hours = (seconds % 86400) / 3600
    daily = 1 + amplitude * np.cos(2 * np.pi * (hours - peak_hour) / 24)
    weekday = ((seconds // 86400).astype(np.int64) + 3) % 7  # 1970-01-01 was a Thursday
    return np.asarray(daily * np.where(weekday >= 5, weekend, 1.0), dtype=np.float64)


@dataclass(frozen=True, slots=True)
class Load:
    """The shared load's knobs: log-sd and lag-1 correlation over runs, log-sd per day."""

    sigma: float = 0.2
    rho: float = 0.7
    day_sigma: float = 0.08


def shared_load(slots: int, per_day: int, load: Load, rng: np.random.Generator) -> Floats:
    """A multiplier per run slot (median 1): AR(1) over runs × a lognormal level per day."""
    shocks = rng.standard_normal(slots) * np.sqrt(1 - load.rho**2)
    ar = lfilter([1.0], [1.0, -load.rho], shocks)
    days = np.repeat(rng.standard_normal(slots // max(1, per_day) + 1), max(1, per_day))
    return np.asarray(np.exp(load.sigma * ar + load.day_sigma * days[:slots]), dtype=np.float64)


def make_series(
    target: str, vantage: str, profile: Profile, starts: Ints, load: Floats | None = None
) -> Series:
    runs = len(starts)
    base = profile.medians(vantage)
    medians = np.tile([base[name] for name in profile.phases], (runs, 1)).astype(np.float64)
    column = profile.phases.index(profile.load_phase)
    cycle = load_cycle(starts, profile.daily_amplitude, profile.peak_hour, profile.weekend_factor)
    medians[:, column] *= cycle if load is None else cycle * load
    sigmas = np.array([SIGMAS[name] for name in profile.phases])

    def constant(value: float) -> Floats:
        return np.full(runs, value, dtype=np.float64)

    return Series(
        target=target,
        vantage=vantage,
        profile=profile,
        starts=starts,
        medians=medians,
        run_sigma=np.tile(sigmas[:, 0], (runs, 1)),
        sample_sigma=np.tile(sigmas[:, 1], (runs, 1)),
        tail_p=constant(profile.tail_p),
        tail_scale_ms=profile.tail_scale * medians[:, column],
        cold_p=constant(profile.cold_p),
        cold_ms=constant(profile.cold_ms),
        error_p=constant(profile.error_p),
        slow=constant(1.0),
    )


def draw(series: Series, samples: int, spacing_s: float, rng: np.random.Generator) -> Drawn:
    runs, names = len(series.starts), series.phases
    shape = (runs, samples, len(names))
    values = (
        series.medians[:, None, :]
        * np.exp(series.run_sigma * rng.standard_normal((runs, len(names))))[:, None, :]
        * np.exp(series.sample_sigma[:, None, :] * rng.standard_normal(shape))
    )
    load = series.column(series.profile.load_phase)
    _tail_and_cold(series, values, load, rng)
    _outliers(series, values, load, rng)
    values[:, :, load] *= series.slow[:, None]
    connect = _connect(values[:, :, series.column("network")], rng)
    phases = np.concatenate([connect[:, :, None], values], axis=2)
    status, phases = _outcomes(series, phases, 1 + load, rng)
    phases = np.round(phases, 3)
    total = np.round(phases.sum(axis=2), 3)
    deadline = series.profile.deadline_ms
    if deadline is not None:
        status, phases, total = _censor(status, phases, total, deadline)
    started = _sample_starts(series.starts, total, spacing_s)
    run_ids = [str(uuid.UUID(bytes=rng.bytes(16), version=4)) for _ in range(runs)]
    return Drawn(series, run_ids, started, status, total, phases, ("connect", *names))


def _tail_and_cold(series: Series, values: Floats, load: int, rng: np.random.Generator) -> None:
    runs, samples = values.shape[:2]
    tailed = rng.random((runs, samples)) < series.tail_p[:, None]
    # Lomax (Pareto II) with shape 1.5: a heavy right tail with a finite mean.
    extra = series.tail_scale_ms[:, None] * rng.pareto(1.5, (runs, samples))
    values[:, :, load] += np.where(tailed, extra, 0.0)
    cold = rng.random(runs) < series.cold_p
    waits = series.cold_ms * np.exp(0.3 * rng.standard_normal(runs))
    values[:, 0, load] += np.where(cold, waits, 0.0)


def _outliers(series: Series, values: Floats, load: int, rng: np.random.Generator) -> None:
    runs, samples, width = values.shape
    hit = rng.random((runs, samples)) < series.profile.outlier_p
    # The load phase or the longest one: a stuck batch, or a runaway generation.
    longest = np.argmax(series.medians, axis=1)[:, None].repeat(samples, axis=1)
    which = np.where(rng.random((runs, samples)) < 0.5, load, longest)
    factor = np.where(hit, rng.uniform(3, 8, (runs, samples)), 1.0)
    rows, cols = np.indices((runs, samples))
    values[rows, cols, which] *= factor


def _connect(network: Floats, rng: np.random.Generator) -> Floats:
    """Pool wait (µs) on a reused connection; DNS + TCP + TLS on each run's first request."""
    connect = 0.03 * np.exp(0.5 * rng.standard_normal(network.shape))
    handshake = 2 * network[:, 0] + 8 * np.exp(0.3 * rng.standard_normal(len(network)))
    connect[:, 0] = handshake
    return np.asarray(connect, dtype=np.float64)


def _outcomes(
    series: Series, phases: Floats, load: int, rng: np.random.Generator
) -> tuple[NDArray[np.int8], Floats]:
    runs, samples, _ = phases.shape
    failed = rng.random((runs, samples)) < series.error_p[:, None]
    http = failed & (rng.random((runs, samples)) < 0.4)
    broken = failed & ~http
    status = np.full((runs, samples), STATUS_OK, dtype=np.int8)
    status[http], status[broken] = STATUS_HTTP_ERROR, STATUS_ERROR
    # An HTTP error answers at once: the head's round trip, a short wait, nothing after.
    quick = phases.copy()
    quick[:, :, load] = rng.uniform(2, 20, (runs, samples))
    quick[:, :, load + 1 :] = 0.0
    phases = np.where(http[:, :, None], quick, phases)
    # A broken stream ends part-way: the phase it was in holds the rest.
    cut = phases.sum(axis=2) * rng.uniform(0.1, 1.0, (runs, samples))
    phases = np.where(broken[:, :, None], _truncate(phases, cut), phases)
    return status, phases


def _truncate(phases: Floats, limit: Floats) -> Floats:
    begins = np.cumsum(phases, axis=2) - phases
    return np.asarray(np.clip(limit[:, :, None] - begins, 0.0, phases), dtype=np.float64)


def _censor(
    status: NDArray[np.int8], phases: Floats, total: Floats, deadline: float
) -> tuple[NDArray[np.int8], Floats, Floats]:
    late = (total > deadline) & (status != STATUS_HTTP_ERROR) & (status != STATUS_ERROR)
    cut = np.round(_truncate(phases, np.full(total.shape, deadline)), 3)
    phases = np.where(late[:, :, None], cut, phases)
    status = np.where(late, STATUS_DEADLINE, status).astype(np.int8)
    return status, phases, np.where(late, deadline, total)


def _sample_starts(starts: Ints, total: Floats, spacing_s: float) -> Ints:
    """Each request starts when the previous one ended, plus the spacing."""
    step = np.round(total * 1000).astype(np.int64) + int(spacing_s * MICROS)
    offsets = np.cumsum(step, axis=1) - step
    return np.asarray(starts[:, None] + offsets, dtype=np.int64)
