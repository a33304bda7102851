"""A rollup row's stored values (``rollup_values``), and a batch's found once per equal row.

A row keeps its period's quantiles beside its sketches once the period has closed
(``coarse.closed``). While it is open, runs are merged into it one after another (a target's
pooled 5-minute row once a run at each vantage: 100 merges for 20 vantages every minute),
and finding its quantiles again at every merge was most of a merge's cost (bench/README.md,
"Rollups: quantiles once a period has closed"): an open row is written without them
(``total_p50`` NULL, no ``summary`` in its document), a read finds them from its sketches
(app.store.reads.timeseries), and the rollup loop's fold writes them once the period has
closed (``app.store.rollups.folds``). The numbers read are the same either way.

A target probed from one vantage has its pooled rows (``POOLED``) equal to that vantage's:
the same runs went into both. A catch-up batch gives both the same part, so the new values
of the two are the same, and their quantiles (most of a merge's cost, bench/fleet.py) are
found once (``RowValues``): a part merged into a stored document equal to one it was merged
into before, or a new row of a part already built, takes the values found then.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from app.analysis.digest import QUANTILES, Digest, merge_digests, summaries
from app.analysis.summary import Summary
from app.store.rollups import coarse
from app.store.rollups.keys import RollupKey


def rollup_values(
    digest: Digest, now: datetime, summarized: bool = True, summary: Summary | None = None
) -> dict[str, Any]:
    """A row's values; ``summarized``: with its quantiles (a closed period's), ``summary``
    when they were found already (``summaries``)."""
    document, total_p50 = digest.to_json(), None
    if summarized:
        summary = summary if summary is not None else digest.summary()
        total_p50 = summary.total.get("p50")
        # The period's quantiles, kept beside its sketches: a history whose buckets are
        # this period reads these few numbers instead of merging sketches.
        document["summary"] = compact_summary(digest, summary)
    return {
        "runs": digest.runs,
        "n": digest.n,
        "total_p50": total_p50,
        "digest": document,
        "updated_at": now,
    }


def compact_summary(digest: Digest, summary: Summary | None = None) -> dict[str, Any]:
    """The quantiles a rollup row keeps beside its sketches (``rollup_values``)."""
    summary = summary if summary is not None else digest.summary()
    return {
        "runs": digest.runs,
        "n": digest.n,
        "errors": digest.errors,
        "deadline_exceeded": digest.deadline_exceeded,
        "total": [summary.total.get(name) for name in QUANTILES],
        "phases": {
            name: [stats.quantiles[q] for q in QUANTILES] for name, stats in summary.phases.items()
        },
    }


class RowValues:
    """One batch's rollup values at ``now``, each found once for equal inputs.

    Parts are told apart by identity (``by_rollup`` gives a run's digest object to each of
    its rows); each is held here, so its id is not reused while this lives.
    """

    def __init__(self, now: datetime) -> None:
        self.now = now
        self._parts: dict[tuple[int, ...], tuple[Sequence[Digest], Digest]] = {}
        self._new: dict[tuple[int, bool], tuple[Digest, dict[str, Any]]] = {}
        self._merged: dict[tuple[int, bool], list[tuple[Digest, Any, dict[str, Any]]]] = {}

    def part(self, parts: Sequence[Digest]) -> Digest:
        """``parts`` as one digest: a lone part is already that; the same parts, the same."""
        if len(parts) == 1:
            return parts[0]
        key = tuple(id(part) for part in parts)
        found = self._parts.get(key)
        if found is None:
            found = self._parts[key] = (parts, merge_digests(parts))
        return found[1]

    def new(self, part: Digest, key: RollupKey) -> dict[str, Any]:
        """The new row of ``key``'s values, of ``part`` alone."""
        closed = coarse.closed(key, self.now)  # its quantiles kept from then on
        found = self._new.get((id(part), closed))
        if found is None:
            found = self._new[(id(part), closed)] = (part, rollup_values(part, self.now, closed))
        return found[1]

    def merged(self, document: Any, part: Digest, key: RollupKey) -> dict[str, Any]:
        """The stored row of ``key``'s new values: its ``document`` with ``part`` merged in."""
        return self.merged_all([(document, part, key)])[0]

    def merged_all(self, rows: Sequence[tuple[Any, Digest, RollupKey]]) -> list[dict[str, Any]]:
        """``merged`` of each (document, part, key), the closed periods' quantiles found in
        one pass for them all (``summaries``)."""
        found: list[dict[str, Any]] = []
        pending: list[tuple[Digest, bool, dict[str, Any]]] = []
        for document, part, key in rows:
            closed = coarse.closed(key, self.now)  # its quantiles kept from then on
            seen = self._merged.setdefault((id(part), closed), [])
            values = next((done for _part, stored, done in seen if stored == document), None)
            if values is None:
                values = {}  # filled below, once every quantile is found
                pending.append((merge_digests([Digest.from_json(document), part]), closed, values))
                seen.append((part, document, values))
            found.append(values)
        summarized = iter(summaries([digest for digest, closed, _ in pending if closed]))
        for digest, closed, values in pending:
            summary = next(summarized) if closed else None
            values.update(rollup_values(digest, self.now, closed, summary))
        return found
