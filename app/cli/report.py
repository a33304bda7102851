"""The human view of a probe: an httpstat-like table of phases, shares and the tail."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from app.analysis.summary import LOW_CONFIDENCE_P99_BELOW, Summary
from app.web.pages.palette import PHASE_COLOURS

BAR_WIDTH = 30


def _bar(share: float, colour: str) -> Text:
    cells = round(share * BAR_WIDTH)
    return Text("█" * cells + "·" * (BAR_WIDTH - cells), style=colour)


def _joined(summary: Summary, unsplit: set[str]) -> str:
    """``queue+prefill``: the phases not split, in the breakdown's order."""
    return "+".join(name for name in summary.phases if name in unsplit)


def summary_table(summary: Summary, unsplit: set[str]) -> Table:
    p99_note = " *" if summary.n < LOW_CONFIDENCE_P99_BELOW else ""
    table = Table(box=None, pad_edge=False, header_style="bold")
    for heading in ("phase", "p50 ms", "p90 ms", f"p99 ms{p99_note}", "share", ""):
        table.add_column(heading, justify="left" if heading in ("phase", "") else "right")
    # Phases the server's timing did not split are one row: the one holding their time,
    # named for all of them (the others hold 0 by construction, not by measurement).
    together = [name for name in summary.phases if name in unsplit]
    holder = max(together, key=lambda name: summary.phases[name].share, default=None)
    joined = _joined(summary, unsplit)
    for name, stats in summary.phases.items():
        if name in unsplit and name != holder:
            continue
        label = joined if name == holder else name
        quantiles = stats.quantiles
        table.add_row(
            Text(label, style="bold" if name == summary.dominant else ""),
            f"{quantiles['p50']:.1f}",
            f"{quantiles['p90']:.1f}",
            f"{quantiles['p99']:.1f}",
            f"{stats.share:.0%}",
            _bar(stats.share, PHASE_COLOURS.get(name, "white")),
        )
    total = summary.total
    table.add_row(
        Text("end-to-end", style="bold"),
        f"{total['p50']:.1f}",
        f"{total['p90']:.1f}",
        f"{total['p99']:.1f}",
        "",
        "",
    )
    return table


def print_summary(console: Console, summary: Summary, unsplit: set[str], samples: int) -> None:
    if summary.n == 0:
        console.print(f"[red]no sample of {samples} produced a latency[/red] (see errors above)")
        return
    console.print(summary_table(summary, unsplit))
    console.print()
    share = summary.phases[summary.dominant].share if summary.dominant else 0.0
    joined = _joined(summary, unsplit)
    dominant = joined if summary.dominant in unsplit else summary.dominant
    console.print(f"dominant phase: [bold]{dominant}[/bold] ({share:.0%} of the medians)")
    console.print(
        f"deadline exceeded: {summary.deadline_exceeded}/{samples}    errors: {summary.errors}"
    )
    if summary.n < LOW_CONFIDENCE_P99_BELOW:
        console.print(f"* p99 from {summary.n} samples: low confidence (want ≥ 100; 300 to alert)")
    if unsplit:
        console.print(
            f"{joined}: the server reported no timing that splits these phases, so they are one row"
        )
    for note in summary.notes:
        console.print(f"[yellow]note:[/yellow] {note.text}", highlight=False)
