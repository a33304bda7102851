"""How numbers look on a page: pure functions of plain values (and ``now``), no I/O.

Units are always written out; a p99 of few samples carries the CLI's low-confidence mark.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from markupsafe import Markup, escape

from app.analysis.summary import LOW_CONFIDENCE_P99_BELOW
from app.web.pages.palette import PHASE_COLOURS

OTHER_COLOUR = "#777777"
STALE_AFTER_INTERVALS = 2
SPARK_WIDTH, SPARK_HEIGHT = 120, 28


def phase_colour(phase: str) -> str:
    return PHASE_COLOURS.get(phase, OTHER_COLOUR)


def format_ms(value: float | None) -> str:
    """Milliseconds with their unit, precise where it matters: '3.42 ms', '187 ms', '2.41 s'."""
    if value is None:
        return "—"
    if value >= 10_000:
        return f"{value / 1000:.1f} s"
    if value >= 1000:
        return f"{value / 1000:.2f} s"
    if value >= 100:
        return f"{value:.0f} ms"
    if value >= 10:
        return f"{value:.1f} ms"
    return f"{value:.2f} ms"


def format_share(share: float | None) -> str:
    return "—" if share is None else f"{share:.0%}"


def format_rate(part: int, whole: int) -> str:
    """A rate with what it is of: '2.5 % (1/40)'."""
    if whole <= 0:
        return "—"
    percent = 100 * part / whole
    shown = f"{percent:.0f}" if percent == 0 or percent >= 10 else f"{percent:.1f}"
    return f"{shown} % ({part}/{whole})"


def low_confidence(n: int) -> bool:
    """A p99 from fewer samples than this is a guess (the CLI marks it with '*')."""
    return n < LOW_CONFIDENCE_P99_BELOW


def age_text(then: datetime | None, now: datetime) -> str:
    if then is None:
        return "never"
    seconds = (now - then).total_seconds()
    if seconds < 0:
        return "in the future"
    if seconds < 60:
        return f"{seconds:.0f} s ago"
    if seconds < 3600:
        return f"{seconds // 60:.0f} min ago"
    if seconds < 86_400 * 2:
        return f"{seconds // 3600:.0f} h ago"
    return f"{seconds // 86_400:.0f} d ago"


def is_stale(
    last_run_at: datetime | None,
    now: datetime,
    interval_s: float | None,
    unknown_after: timedelta | None = None,
) -> bool:
    """No run for more than two intervals: the probe (or its scheduler) is not running.
    With no interval known (a target known by its runs), none for ``unknown_after``."""
    if last_run_at is None:
        return True
    if not interval_s:
        return unknown_after is not None and now - last_run_at > unknown_after
    return now - last_run_at > STALE_AFTER_INTERVALS * timedelta(seconds=interval_s)


@dataclass(frozen=True, slots=True)
class Segment:
    phase: str
    share: float
    colour: str


def share_segments(shares: Iterable[tuple[str, float | None]]) -> list[Segment]:
    """The stacked share bar, in phase order; empty phases take no room."""
    return [
        Segment(phase, share, phase_colour(phase)) for phase, share in shares if share and share > 0
    ]


def sparkline_path(
    values: Sequence[float | None], width: int = SPARK_WIDTH, height: int = SPARK_HEIGHT
) -> str:
    """An SVG path ``d`` scaled into width × height; a gap (None) breaks the line."""
    known = [v for v in values if v is not None]
    if not known or len(values) < 2:
        return ""
    low, high = min(known), max(known)
    span = (high - low) or 1.0
    step = width / (len(values) - 1)
    parts: list[str] = []
    pen_down = False
    for index, value in enumerate(values):
        if value is None:
            pen_down = False
            continue
        x = index * step
        y = height - 1 - (value - low) / span * (height - 2)
        parts.append(f"{'L' if pen_down else 'M'}{x:.1f},{y:.1f}")
        pen_down = True
    return "".join(parts)


def sparkline_range(values: Sequence[float | None]) -> tuple[float, float] | None:
    known = [v for v in values if v is not None]
    return (min(known), max(known)) if known else None


# HTML fragments repeated on every row: built here, not in Jinja macros, because a page of
# 400 rows spends most of its time calling macros. Every variable part is escaped.


def chip_html(phase: str | None) -> Markup:
    if not phase:
        return Markup('<span class="muted">—</span>')
    colour, name = escape(phase_colour(phase)), escape(phase)
    return Markup(
        f'<span class="chip"><span class="swatch" style="--c:{colour}" aria-hidden="true">'
        f"</span>{name}</span>"
    )


def sharebar_html(segments: Sequence[Segment], label: str) -> Markup:
    described = escape(", ".join(f"{s.phase} {format_share(s.share)}" for s in segments))
    parts = "".join(
        f'<span style="width:{s.share * 100:.2f}%;--c:{escape(s.colour)}"'
        f' title="{escape(s.phase)} {format_share(s.share)}"></span>'
        for s in segments
    )
    return Markup(
        f'<div class="sharebar" role="img" aria-label="{escape(label)}: {described}">{parts}</div>'
    )


def state_html(state: str) -> Markup:
    name = escape(state)
    return Markup(f'<span class="state state-{name}">{name}</span>')


def p99_html(value: float | None, n: int) -> Markup:
    shown = escape(format_ms(value))
    if not low_confidence(n):
        return shown
    return Markup(
        f'{shown}<abbr class="lowconf" title="p99 from {n} samples: low confidence'
        ' (want ≥ 100; 300 to alert)">*</abbr>'
    )


def spark_html(values: Sequence[float | None], what: str) -> Markup:
    path, span = sparkline_path(values), sparkline_range(values)
    if not path or span is None:
        return Markup('<span class="muted">no data</span>')
    text = escape(f"{what} from {format_ms(span[0])} to {format_ms(span[1])}")
    width, height = SPARK_WIDTH, SPARK_HEIGHT
    size = f'width="{width}" height="{height}" viewBox="0 0 {width} {height}"'
    return Markup(
        f'<svg class="spark" {size} role="img" aria-label="{text}">'
        f'<title>{text}</title><path d="{path}"/></svg>'
    )
