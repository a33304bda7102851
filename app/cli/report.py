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


def summary_table(summary: Summary, unsplit: set[str]) -> Table:
    p99_note = " *" if summary.n < LOW_CONFIDENCE_P99_BELOW else ""
    table = Table(box=None, pad_edge=False, header_style="bold")
    for heading in ("phase", "p50 ms", "p90 ms", f"p99 ms{p99_note}", "share", ""):
        table.add_column(heading, justify="left" if heading in ("phase", "") else "right")
    for name, stats in summary.phases.items():
        label = f"{name} (+{'+'.join(sorted(unsplit - {name}))})" if name in unsplit else name
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
    console.print(f"dominant phase: [bold]{summary.dominant}[/bold] ({share:.0%} of the medians)")
    console.print(
        f"deadline exceeded: {summary.deadline_exceeded}/{samples}    errors: {summary.errors}"
    )
    if summary.n < LOW_CONFIDENCE_P99_BELOW:
        console.print(f"* p99 from {summary.n} samples: low confidence (want ≥ 100; 300 to alert)")
    if unsplit:
        console.print(
            "(+…): the server reported no timing, so these phases could not be told apart"
        )
    for note in summary.notes:
        console.print(f"[yellow]note:[/yellow] {note.text}", highlight=False)
