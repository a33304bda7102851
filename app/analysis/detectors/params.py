"""Per-target detector settings (``alerts:`` in the targets file), validated against the
registry. docs/detection.md says why each default is what it is."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from app.analysis.detectors.objectiveparams import ObjectiveParams, check
from app.analysis.detectors.registry import DETECTORS, default_enabled
from app.analysis.objectives import Objective
from app.analysis.slo import BurnWindow
from app.durations import Seconds

DAY = 86400.0
# Keys an older targets file may still carry, and what took their place.
REPLACED = {
    "deadline_slo": "slo.objective (its complement: deadline_slo 0.01 is objective 0.99)",
    "deadline_alpha": "slo.alpha",
    "tail_ratio": "tail_min_ratio (the smallest of a family of tail inflations the CUSUM weighs)",
    "tail_min_relative": "tail_min_ratio (a tail change smaller than it never grows the CUSUM)",
    "tail_min_ms": "tail_min_ratio (the tail's growth is judged as a share, over the run median)",
}


class BurnWindowParams(BaseModel):
    """One multiwindow pair: alert when both windows burn at ``burn`` × or more."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    long: Seconds = Field(
        gt=0, description="Burning this long: a real share of the budget is gone."
    )
    short: Seconds = Field(gt=0, description="And this long: it is still going now.")
    burn: float = Field(gt=0, description="The burn rate both windows reach, × the budget's.")

    @model_validator(mode="after")
    def _short_is_shorter(self) -> BurnWindowParams:
        if self.short > self.long:
            raise ValueError("short must not be longer than long")
        return self

    def window(self) -> BurnWindow:
        return BurnWindow(timedelta(seconds=self.long), timedelta(seconds=self.short), self.burn)


def _pair(long: float, short: float, burn: float) -> BurnWindowParams:
    return BurnWindowParams(long=long, short=short, burn=burn)


class SloParams(BaseModel):
    """The deadline as an SLO: ``objective`` of timed requests within it over ``budget``.
    The defaults are the SRE workbook's: page at 14.4× over 1 h (and 5 min) or 6× over
    6 h (and 30 min); ticket at 1× over 3 days (and 6 h)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    objective: float = Field(
        0.99, gt=0, lt=1, description="Share of timed requests within `deadline_ms`."
    )
    budget: Seconds = Field(30 * DAY, gt=0, description="The error budget's window.")
    page: tuple[BurnWindowParams, ...] = Field(
        (_pair(3600, 300, 14.4), _pair(21600, 1800, 6.0)), description="Pairs that page (critical)."
    )
    ticket: tuple[BurnWindowParams, ...] = Field(
        (_pair(3 * DAY, 21600, 1.0),), description="Pairs that open a ticket (warning)."
    )
    # A probe sends a few requests a run: a long window must burn at its factor beyond
    # chance (exact binomial test at this level), its misses from more than one run.
    alpha: float = Field(0.01, gt=0, lt=0.5, description="Burning beyond chance at this level.")
    min_runs_missing: int = Field(2, ge=1, description="Misses from at least this many runs.")

    @property
    def budget_window(self) -> timedelta:
        return timedelta(seconds=self.budget)


class DetectorParams(BaseModel):
    """Per-target detector settings (``alerts:`` in the targets file)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    recent_runs: int = Field(4, ge=2, le=100, description="The recent window: the newest runs.")
    reference_days: float = Field(7.0, gt=0, description="The reference: days of runs before it.")
    min_reference_runs: int = Field(
        24, ge=4, description="With fewer reference runs, detectors comparing against it abstain."
    )
    # A reference must have seen a whole day: busy hours are only "normal" once seen.
    min_reference_days: float = Field(
        1.0, ge=0, description="Likewise with a reference spanning fewer days."
    )
    confirm: int = Field(2, ge=1, le=20, description="Hits in a row before an alert fires.")
    recover: int = Field(2, ge=1, le=50, description="Clears in a row before it resolves.")
    # A firing alert whose condition clears stays firing until it has been clear this
    # long (Prometheus' keep_firing_for); a resolved one does not fire again for the same
    # key until its condition has been clear this long, or has held this long. A day: a
    # condition that comes back with each day's busy hours is one fact, not daily news.
    keep_firing_for: Seconds = Field(
        0.0, description="A firing alert whose condition clears stays firing this long."
    )
    refire_hold: Seconds = Field(
        24 * 3600.0,
        description="A resolved key fires again only once quiet, or holding, this long.",
    )
    dominant_lead_pp: float = Field(
        5.0, gt=0, lt=100, description="A challenger's least lead over the dominant phase, in pp."
    )
    # The newest runs of the recent window that judge a leader change: with all four, one
    # pre-change run keeps the lead's lower bound at 0 for a run longer.
    dominant_runs: int = Field(
        3,
        ge=2,
        le=100,
        description="The newest runs of the recent window that judge a leader change.",
    )
    # Large leads move at once (a collapse, a new route): two runs say so plainly.
    dominant_fast_lead_pp: float = Field(
        20.0,
        ge=0,
        lt=100,
        description="A lead this large (pp) is judged on the newest `dominant_fast_runs`; 0: off.",
    )
    dominant_fast_runs: int = Field(
        2, ge=1, le=100, description="The newest runs that judge a lead that large."
    )
    # A leader change every vantage shows in one run, its server-side phase moved this many
    # one-run spreads (pooled) and materially at each: told on that round
    # (app/alerts/oneround.py). A generation collapse or regrowth reads ~30.
    dominant_round_z: float = Field(
        12.0,
        ge=0,
        description="One round is enough when every vantage's newest run shows the leader"
        " change and its server-side phase moved this many spreads (pooled); 0: off.",
    )
    # Windows of two or three runs move together when whole runs do (shared load, busy
    # hours); the bootstrap over those runs cannot see it, the reference's runs can.
    dominant_spread_z: float = Field(
        5.0,
        ge=0,
        le=10,
        description="The challenger must gain on the leader by this many of the reference's"
        " run-to-run spreads of a window's log ratio; 0: off.",
    )
    tail_min_ratio: float = Field(
        1.5,
        ge=1.5,
        le=8,
        description="The least growth of the mass beyond a tail quantile that tail_shift weighs.",
    )
    tail_threshold: float = Field(
        13.0,
        gt=0,
        description="The load phase's tail CUSUM's threshold, in nats (no gate after it).",
    )
    # Per vantage, so one such stream per vantage where the load phase's is one a target.
    tail_threshold_end_to_end: float = Field(
        14.0, gt=0, description="The end-to-end tail CUSUM's threshold, in nats."
    )
    # Days of reference at the same hours before a tail is judged: a day-to-day difference
    # is only known once two days have been seen.
    tail_min_days: int = Field(2, ge=0, le=7, description="Days of reference at those hours.")
    # A slowdown smaller than this is the week's breathing, not news: the CUSUM's allowance
    # (runs slower by less add no evidence), its alternative twice that.
    level_min_relative: float = Field(
        0.12, gt=0, le=1, description="Least slowdown worth an alert, relative to these hours'."
    )
    level_min_ms: float = Field(10.0, ge=0, description="And at least this many ms.")
    level_threshold: float = Field(12.0, gt=0, description="The level CUSUM's threshold, in nats.")
    # A shift is judged on the newest runs: a load busy for days creeps up a little each run,
    # and summed over days that creep would read as a change.
    level_window_runs: int = Field(
        16, ge=2, le=96, description="The level CUSUM sums the newest this many runs at most."
    )
    level_min_days: float = Field(
        3.0, ge=0, le=7, description="Days of reference before a level is judged."
    )
    # One wild run (a whole run × 10) must not cross alone: a run adds at most this share.
    level_cap: float = Field(
        0.5, gt=0, lt=1, description="Most of the threshold one run may add, as a share of it."
    )
    # A phase every vantage sees (the server's, the answer's transfer) is also judged on the
    # vantages' increments pooled (app.analysis.levelpool): one CUSUM for the target, whose
    # crossing is the service's level_shift. Its own threshold: the pooled stream is one more
    # than the vantages' own (bench/detection/README.md, "level_shift's pooled lane").
    level_pooled_threshold: float = Field(
        12.0, ge=0, description="The pooled level CUSUM's threshold, in nats; 0: off."
    )
    # Its alternative, in allowances: pooled, the noise is the vantages' mean, and a phase
    # doubled (about 6 allowances) is weighed nearer to what it is than by the vantage's 2.
    level_pooled_alternative: float = Field(
        4.0, ge=1, le=8, description="The pooled level CUSUM's alternative, in allowances."
    )
    # The CUSUM is its own confirmation: it needs two runs at least (``level_cap``).
    level_confirm: int = Field(1, ge=1, le=20, description="Hits in a row before it fires.")
    # A new server-side leader at one vantage is the service's change once the vantages'
    # pooled evidence puts that phase's growth this many spreads above these hours' normal.
    pooled_min_z: float = Field(
        4.0, ge=0, description="Pooled evidence (z) that a server-side phase grew; 0: off."
    )
    slo: SloParams = Field(default_factory=SloParams, description="The deadline as an SLO.")
    objectives: dict[str, ObjectiveParams] = Field(
        default_factory=dict,
        description="More SLOs (docs/slo.md): `ttft_ms: {p: 99, below: 500}`,"
        " `availability: {target: 99.5}`; budget and burn windows are `slo`'s.",
    )
    composition_min_distance: float = Field(
        0.5, gt=0, description="Least Aitchison distance the phase mix moves."
    )
    composition_alpha: float = Field(0.01, gt=0, lt=1, description="The permutation test's level.")
    composition_confirm: int = Field(4, ge=1, le=50, description="Hits in a row before it warns.")
    failing_runs: int = Field(3, ge=1, description="Runs in a row with every request failed.")
    baseline_from: datetime | None = Field(
        None, description="Pin baseline_drift's baseline: the week of runs from this date on."
    )
    baseline_max_age_days: float = Field(
        35.0, ge=7, description="An unpinned baseline is frozen anew when this many days old."
    )
    baseline_drift_min: float = Field(
        0.2, gt=0, description="Least drift of end-to-end p50, or a phase's median (× 1 + this)."
    )
    baseline_drift_share: float = Field(
        0.1, ge=0, lt=1, description="A phase's drift counts when it holds this share or more."
    )
    baseline_drift_adds: float = Field(
        0.05, ge=0, lt=1, description="… and when its rise adds this share of end-to-end."
    )
    baseline_tail_min: float = Field(
        0.5, gt=0, description="Least drift of the share of samples over the baseline's p95."
    )
    baseline_drift_sigmas: float = Field(
        5.0, ge=0, description="And beyond this many of the baseline's day-to-day spreads."
    )
    baseline_drift_confirm: int = Field(
        4, ge=1, le=100, description="Hits in a row before baseline_drift warns."
    )
    resamples: int = Field(
        400, ge=50, le=10_000, description="Hierarchical bootstrap resamples behind each interval."
    )
    enabled: tuple[str, ...] = Field(
        default_factory=default_enabled, description="The detectors that run for this target."
    )

    @model_validator(mode="before")
    @classmethod
    def _replaced_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for old, new in REPLACED.items():
                if old in data:
                    raise ValueError(f"{old} was replaced by {new}")
        return data

    @model_validator(mode="after")
    def _known_objectives(self) -> DetectorParams:
        check(self.objectives, type(self).__name__)
        return self

    def objective_list(self) -> tuple[Objective, ...]:
        """The objectives as the analysis takes them, in the file's order."""
        return tuple(params.objective(name) for name, params in self.objectives.items())

    @field_validator("baseline_from")
    @classmethod
    def _aware(cls, at: datetime | None) -> datetime | None:
        # A date without a zone is UTC's, as every time phasewatch shows.
        return at.replace(tzinfo=UTC) if at is not None and at.tzinfo is None else at

    @field_validator("enabled")
    @classmethod
    def _known_detectors(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [name for name in names if name not in DETECTORS]
        if unknown:
            known = ", ".join(DETECTORS)
            raise ValueError(f"unknown detector {', '.join(map(repr, unknown))}; known: {known}")
        return names
