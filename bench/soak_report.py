"""A soak's readings of serve, summarised: levels as min / median / max of 5 minutes of
readings (RSS saws by tens of MB as runs, queries and trims come and go), the change over
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


def window(readings: list[Reading], start_s: float, span_s: float = LEVEL_SPAN_S) -> list[float]:
    """RSS min, median and max of the readings in [start_s, start_s + span_s): RSS saws by
    tens of MB between serve's trims (once a minute) and as runs and queries come and go;
    one reading is noise. The min is what stays after a trim, the max the peaks."""
    inside = sorted(r.rss_mb for r in readings if start_s <= r.at_s < start_s + span_s)
    inside = inside or [readings[-1].rss_mb]
    return [inside[0], inside[len(inside) // 2], inside[-1]]


def summary_rows(readings: list[Reading], warmup_s: float, last_s: float) -> list[list[str]]:
    end_s = readings[-1].at_s
    part_s = max(warmup_s, end_s - last_s)
    warm, part = window(readings, warmup_s), window(readings, part_s)
    end = window(readings, end_s - LEVEL_SPAN_S + 1)
    change = " / ".join(f"{(e - p) / p * 100:+.1f} %" for e, p in zip(end, part, strict=True))
    after = [r for r in readings if r.at_s >= warmup_s]
    late = [r for r in readings if r.at_s >= part_s]
    fds_at = {
        name: _median([r.fds for r in readings if at <= r.at_s < at + LEVEL_SPAN_S])
        for name, at in (("warm", warmup_s), ("end", end_s - LEVEL_SPAN_S + 1))
    }
    mb = "{:.1f}"
    return [
        ["RSS at start (first reading)", f"{readings[0].rss_mb:.1f} MB"],
        [f"RSS min / median / max, 5 min from {warmup_s / 60:g} min (warm-up end)", _mb(warm)],
        [f"RSS min / median / max, 5 min from {part_s / 60:.1f} min", _mb(part)],
        [f"RSS min / median / max, the last {LEVEL_SPAN_S / 60:g} min", _mb(end)],
        [f"RSS change over the last {(end_s - part_s) / 60:.0f} min (min / median / max)", change],
        ["RSS min / max after warm-up", _range([r.rss_mb for r in after], mb + " MB")],
        ["open fds: warm-up end / end (5-min medians)", f"{fds_at['warm']} / {fds_at['end']}"],
        ["open fds min / max after warm-up", _range([r.fds for r in after], "{}")],
        ["open fds min / max in the last part", _range([r.fds for r in late], "{}")],
        ["threads min / max after warm-up", _range([r.threads for r in after], "{}")],
        [
            "serve CPU",
            f"{readings[-1].cpu_s:.0f} s ({readings[-1].cpu_s / max(end_s, 1):.0%} of a core)",
        ],
    ]


def _mb(values: list[float]) -> str:
    return " / ".join(f"{v:.1f}" for v in values) + " MB"


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
