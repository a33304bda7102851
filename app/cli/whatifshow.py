"""How `phasewatch whatif` shows a prediction: tables for people, one JSON object for scripts."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rich.console import Console
from rich.table import Table

from app.analysis.whatif import (
    EndToEnd,
    Interval,
    Lever,
    ObjectiveLevers,
    Prediction,
    levers_to_json,
)
from app.analysis.whatif.levers import headline


def to_json(
    target: str,
    vantage: str | None,
    prediction: Prediction,
    found: list[Lever],
    by_objective: list[ObjectiveLevers],
) -> dict[str, Any]:
    return {
        "target": target,
        "vantage": vantage,
        **prediction.to_json(),
        "levers": levers_to_json(found),
        "objective_levers": [ranked.to_json() for ranked in by_objective],
    }


def print_prediction(
    target: str,
    vantage: str | None,
    window: tuple[datetime, datetime],
    prediction: Prediction,
    levers: tuple[list[Lever], list[ObjectiveLevers]],
) -> None:
    console = Console(width=120)
    found, by_objective = levers
    before, after = prediction.before, prediction.after
    where = "every vantage" if vantage is None else f"vantage {vantage}"
    console.print(
        f"{target} ({where}), {window[0]:%Y-%m-%d %H:%M} → {window[1]:%Y-%m-%d %H:%M} UTC: "
        f"{before.samples} samples in {before.runs} runs",
        highlight=False,
    )
    if prediction.changes:
        changes = " ".join(change.token() for change in prediction.changes)
        console.print(f"changes: {changes}", highlight=False)
        console.print(_comparison(before, after))
        console.print(_shares(before, after))
        if prediction.objectives:
            console.print(_objectives(prediction))
    console.print(_levers(found, before))
    for ranked in by_objective:
        console.print(f"levers for {ranked.headline()}", highlight=False)
    for note in prediction.notes:
        console.print(f"note: {note}", highlight=False)


def _comparison(before: EndToEnd, after: EndToEnd) -> Table:
    table = Table(box=None, header_style="bold", title_justify="left")
    for heading in ("end-to-end", "now (95 % interval)", "after (95 % interval)"):
        table.add_column(heading, justify="left" if heading == "end-to-end" else "right")
    for name in ("p50_ms", "p90_ms", "p99_ms"):
        table.add_row(name[:3], _ms(getattr(before, name)), _ms(getattr(after, name)))
    deadline = "" if after.deadline_ms is None else f" (deadline {after.deadline_ms:g} ms)"
    table.add_row(f"miss rate{deadline}", _rate(before.miss_rate), _rate(after.miss_rate))
    table.add_row("dominant", _lead(before, before.dominant), _lead(after, after.dominant))
    table.add_row("would lead next", before.next_dominant or "-", after.next_dominant or "-")
    return table


def _shares(before: EndToEnd, after: EndToEnd) -> Table:
    table = Table(box=None, header_style="bold")
    for heading in ("phase", "share now", "share after"):
        table.add_column(heading, justify="left" if heading == "phase" else "right")
    for phase in before.shares:
        table.add_row(phase, _pct(before.shares[phase]), _pct(after.shares.get(phase, 0.0)))
    return table


def _objectives(prediction: Prediction) -> Table:
    table = Table(box=None, header_style="bold")
    headings = ("objective (share met)", "now (95 % interval)", "after (95 % interval)", "burn")
    for heading in headings:
        table.add_column(heading, justify="left" if heading.startswith("objective") else "right")
    for outcome in prediction.objectives:
        bound = "" if outcome.below_ms is None else f" ≤ {outcome.below_ms:g} ms"
        burns = (outcome.burn(outcome.before), outcome.burn(outcome.after))
        burn = "-" if None in burns else " → ".join(f"{b.value:.1f}×" for b in burns if b)
        table.add_row(
            f"{outcome.metric}{bound}", _share(outcome.before), _share(outcome.after), burn
        )
    return table


def _share(share: Interval | None) -> str:
    return "-" if share is None else f"{share.value:.1%} ({share.lo:.1%}–{share.hi:.1%})"


def _levers(found: list[Lever], now: EndToEnd) -> Table:
    table = Table(
        box=None,
        header_style="bold",
        title=f"levers now: {headline(found, now.p99_ms.value, now.p50_ms.value)}",
        title_justify="left",
    )
    headings = ("phase", "share", "halved p50", "p99", "miss", "gone p50", "p99", "miss")
    for heading in headings:
        table.add_column(heading, justify="left" if heading == "phase" else "right")
    for lever in found:
        table.add_row(
            lever.phase,
            _pct(lever.share),
            *(f"{value:.0f} ms" for value in (lever.halved.p50_ms, lever.halved.p99_ms)),
            _pct(lever.halved.miss_rate),
            *(f"{value:.0f} ms" for value in (lever.removed.p50_ms, lever.removed.p99_ms)),
            _pct(lever.removed.miss_rate),
        )
    return table


def _ms(value: Interval) -> str:
    return f"{value.value:.0f} ms ({value.lo:.0f}–{value.hi:.0f})"


def _rate(value: Interval) -> str:
    return f"{value.value:.1%} ({value.lo:.1%}–{value.hi:.1%})"


def _pct(share: float) -> str:
    return f"{share:.0%}"


def _lead(outcome: EndToEnd, phase: str | None) -> str:
    return "-" if phase is None else f"{phase} ({outcome.shares[phase]:.0%})"
