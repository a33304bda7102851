"""The overview's breakdowns: each series' window from its run digests, for every series or
for one page of them (what ``current_breakdowns(exact=False)`` reads)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from sqlalchemy import Select, and_, bindparam, or_, select
from sqlalchemy.orm import Session

from app.analysis.breakdown import Breakdown, from_columns
from app.analysis.digest import Digest
from app.analysis.series import digest_columns
from app.store.inlists import padded
from app.store.models import RunDigestRow, TargetRow

Pair = tuple[int, str]  # (target id, vantage)


def digest_breakdowns(
    session: Session,
    span: tuple[datetime, datetime],
    last: dict[Pair, datetime],
    pairs: Collection[Pair] | None = None,
) -> dict[Pair, Breakdown]:
    """Each pair of ``last`` (of ``pairs`` only, when given): its digests in ``span``; one
    with no run in it shows the same width up to its own latest run instead (its age says
    how old that is): the latest state of every series, however old, never an empty row."""
    start, now = span
    wanted = sorted(last if pairs is None else set(pairs) & last.keys())
    names = _names(session, {target for target, _ in wanted})
    groups = _grouped(session, span, None if pairs is None else wanted)
    spans = dict.fromkeys(wanted, span)
    older = {pair: latest_span(last[pair], now - start) for pair in wanted
             if not groups.get(pair) and last[pair] < start}  # fmt: skip
    spans |= older
    groups |= _digests_in(session, older)
    columns = digest_columns([groups.get(pair, []) for pair in wanted])
    return {
        pair: from_columns(
            columns, i, (names[pair[0]], pair[1]), spans[pair], last[pair], groups.get(pair, [])
        )  # fmt: skip
        for i, pair in enumerate(wanted)
    }


def latest_span(last: datetime, width: timedelta) -> tuple[datetime, datetime]:
    """A span as wide as the window, ending just after ``last`` (its run included)."""
    return last - width, last + timedelta(microseconds=1)


def _grouped(
    session: Session, span: tuple[datetime, datetime], pairs: list[Pair] | None
) -> dict[Pair, list[Digest]]:
    """The window's digests by pair: every target's through ix_run_digests_started_at (all
    pairs), or a page's through (target_id, vantage, started_at)."""
    query = _digests(*span)
    if pairs is not None:
        targets = padded(sorted({target for target, _ in pairs}))
        query = query.where(RunDigestRow.target_id.in_(targets))
    groups: dict[Pair, list[Digest]] = defaultdict(list)
    wanted = None if pairs is None else set(pairs)
    for target, vantage, data in session.execute(query):
        if wanted is None or (target, vantage) in wanted:
            groups[(target, vantage)].append(Digest.from_json(data))
    return groups


def _names(session: Session, targets: set[int]) -> dict[int, str]:
    query = select(TargetRow.id, TargetRow.name)
    if len(targets) < 1000:  # a page's: an IN list; the fleet's: the whole (small) table
        query = query.where(TargetRow.id.in_(padded(sorted(targets))))
    return {row.id: row.name for row in session.execute(query)}


def _digests_in(
    session: Session, spans: dict[Pair, tuple[datetime, datetime]]
) -> dict[Pair, list[Digest]]:
    """Each pair's digests in its own span, in one statement (one index range each): a
    page of series whose runs are older than the window, read one by one, was half the
    page's time (``bench.dashboard_overview``)."""
    found: dict[Pair, list[Digest]] = {pair: [] for pair in spans}
    if not spans:
        return found
    given = padded(sorted(spans.items()))
    params = {f"{name}{i}": value for i, (pair, span) in enumerate(given)
              for name, value in zip("tvse", (*pair, *span), strict=True)}  # fmt: skip
    query = _spans_query(len(given))
    for target, vantage, at, data in session.execute(query, params):
        start, end = spans[(target, vantage)]
        if start <= at < end:
            found[(target, vantage)].append(Digest.from_json(data))
    return found


@cache
def _spans_query(size: int) -> Select[int, str, datetime, dict[str, Any]]:
    """``size`` pairs' spans, ``t<i>``, ``v<i>``, ``s<i>``, ``e<i>``: built once a size (the
    expression of 64 spans costs more to build than to run)."""
    each = [and_(RunDigestRow.target_id == bindparam(f"t{i}"),
                 RunDigestRow.vantage == bindparam(f"v{i}"),
                 RunDigestRow.started_at >= bindparam(f"s{i}"),
                 RunDigestRow.started_at < bindparam(f"e{i}")) for i in range(size)]  # fmt: skip
    return select(RunDigestRow.target_id, RunDigestRow.vantage, RunDigestRow.started_at,
                  RunDigestRow.digest).where(or_(*each))  # fmt: skip


def _digests(start: datetime, end: datetime) -> Select[int, str, dict[str, Any]]:
    """The run digests of runs started in [start, end), with their target and vantage."""
    return select(RunDigestRow.target_id, RunDigestRow.vantage, RunDigestRow.digest).where(
        RunDigestRow.started_at >= start, RunDigestRow.started_at < end
    )
