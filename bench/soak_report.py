"""A soak's readings of serve, summarised: levels as medians of 5 minutes of readings (RSS
saws up and down by tens of MB as runs, queries and trims come and go), the change over
the last part, fds and threads after the warm-up. ``parsed`` reads them back from a
soak's printed table (``python -m bench.soak --summarize FILE``)."""

from __future__ import annotations

from dataclasses import dataclass

LEVEL_SPAN_S = 300.0


@dataclass(frozen=True)
class Reading:
    """One look at serve: seconds since it answered, memory, fds, threads, CPU, runs."""

    at_s: float
    rss_mb: float
    anon_mb: float  # RssAnon: the heap, not the files mapped (libraries)
    fds: int
    threads: int
    cpu_s: float
    runs: int


def level(readings: list[Reading], start_s: float, span_s: float = LEVEL_SPAN_S) -> Reading:
    """The median reading (by RSS) of those in [start_s, start_s + span_s): RSS saws up
    and down by tens of MB as runs, queries and trims come and go; one reading is noise."""
    inside = [r for r in readings if start_s <= r.at_s < start_s + span_s] or readings[-1:]
    return sorted(inside, key=lambda r: r.rss_mb)[len(inside) // 2]


def summary_rows(readings: list[Reading], warmup_s: float, last_s: float) -> list[list[str]]:
    end_s = readings[-1].at_s
    part_s = max(warmup_s, end_s - last_s)
    warm, part = level(readings, warmup_s), level(readings, part_s)
    end = level(readings, end_s - LEVEL_SPAN_S + 1)
    change = (end.rss_mb - part.rss_mb) / part.rss_mb * 100
    late = [r for r in readings if r.at_s >= part_s]
    after = [r for r in readings if r.at_s >= warmup_s]
    span = f"median of {LEVEL_SPAN_S / 60:g} min of readings"
    fds_at = {
        name: _median([r.fds for r in readings if at <= r.at_s < at + LEVEL_SPAN_S])
        for name, at in (("warm", warmup_s), ("end", end_s - LEVEL_SPAN_S + 1))
    }
    return [
        ["RSS at start (first reading)", f"{readings[0].rss_mb:.1f} MB"],
        [f"RSS at warm-up end ({warmup_s / 60:g} min; {span})", f"{warm.rss_mb:.1f} MB"],
        [f"RSS at the last part's start ({part_s / 60:.1f} min)", f"{part.rss_mb:.1f} MB"],
        [f"RSS at the end (the last {LEVEL_SPAN_S / 60:g} min)", f"{end.rss_mb:.1f} MB"],
        [f"RSS change over the last {(end_s - part_s) / 60:.0f} min", f"{change:+.1f} %"],
        ["RSS min / max in the last part", _range([r.rss_mb for r in late], "{:.1f} MB")],
        ["RSS min / max after warm-up", _range([r.rss_mb for r in after], "{:.1f} MB")],
        ["open fds: warm-up end / end (5-min medians)", f"{fds_at['warm']} / {fds_at['end']}"],
        ["open fds min / max after warm-up", _range([r.fds for r in after], "{}")],
        ["open fds min / max in the last part", _range([r.fds for r in late], "{}")],
        ["threads min / max after warm-up", _range([r.threads for r in after], "{}")],
        [
            "serve CPU",
            f"{readings[-1].cpu_s:.0f} s ({readings[-1].cpu_s / max(end_s, 1):.0%} of a core)",
        ],
    ]


def _median(values: list[int]) -> int:
    return sorted(values)[len(values) // 2] if values else 0


def _range(values: list[float] | list[int], style: str) -> str:
    return f"{style.format(min(values))} / {style.format(max(values))}"


def parsed(output: str) -> list[Reading]:
    """The readings a soak printed (its table of readings), to summarise them again."""
    found = []
    for line in output.splitlines():
        cells = [c.strip().replace(",", "") for c in line.strip("| \n").split("|")]
        if len(cells) == 7 and cells[0].replace(".", "").isdigit():
            minutes, rss, anon, fds, threads, cpu, runs = cells
            found.append(
                Reading(
                    float(minutes) * 60,
                    float(rss),
                    float(anon),
                    int(fds),
                    int(threads),
                    float(cpu),
                    int(runs),
                )
            )
    return found
