"""RowValues: a batch's rollup values found once for equal rows, and the same as found alone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from app.analysis.digest import Digest, merge_digests
from app.analysis.sketch import Sketch
from app.analysis.summary import Summary
from app.store.rollups import coarse, values
from app.store.rollups.values import RowValues, rollup_values

NOW = datetime(2026, 12, 6, 22, 0, tzinfo=UTC)
CLOSED = (1, "eu", 300, NOW - timedelta(minutes=5))  # its period ended at NOW
OPEN = (1, "eu", 300, NOW)


def digest(*totals: float) -> Digest:
    return Digest(
        runs=1,
        n=len(totals),
        total=Sketch.of(totals),
        phases={"connect": Sketch.of([t / 4 for t in totals]), "queue": Sketch.of(totals)},
        provenance={"connect": {"measured": len(totals)}},
    )


def stored(part: Digest) -> dict[str, Any]:
    """A row's document as the database gives it back."""
    return dict(rollup_values(part, NOW)["digest"])


def merged_alone(document: dict[str, Any], part: Digest) -> dict[str, Any]:
    return rollup_values(merge_digests([Digest.from_json(document), part]), NOW)


@pytest.fixture
def summaries(monkeypatch: pytest.MonkeyPatch) -> list[Digest]:
    """Every digest whose values (its quantiles) were found."""
    found: list[Digest] = []

    def counted(
        digest: Digest, now: datetime, summarized: bool = True, summary: Summary | None = None
    ) -> dict[str, Any]:
        found.append(digest)
        return rollup_values(digest, now, summarized, summary)

    monkeypatch.setattr(values, "rollup_values", counted)
    return found


def test_a_part_merged_into_equal_documents_is_summarised_once(summaries: list[Digest]) -> None:
    part, before = digest(10, 20, 30), digest(5, 15)
    rows = RowValues(NOW)
    vantage, pooled = stored(before), stored(before)  # a target seen from one vantage
    first = rows.merged(vantage, part, CLOSED)
    assert rows.merged(pooled, part, CLOSED) is first
    assert len(summaries) == 1
    assert first == merged_alone(vantage, part)


@pytest.mark.parametrize(
    ("other", "again"),
    [
        ("another document", False),  # a pooled row that holds another vantage's runs
        ("another part", True),  # the same document, another run's part
    ],
)
def test_different_inputs_are_each_summarised_as_alone(
    summaries: list[Digest], other: str, again: bool
) -> None:
    part, before = digest(10, 20, 30), digest(5, 15)
    rows = RowValues(NOW)
    first = rows.merged(stored(before), part, CLOSED)
    document = stored(merge_digests([before, digest(400)])) if not again else stored(before)
    second_part = digest(7, 8) if again else part
    second = rows.merged(document, second_part, CLOSED)
    assert len(summaries) == 2, other
    assert first == merged_alone(stored(before), part)
    assert second == merged_alone(document, second_part)
    assert second != first


def test_new_rows_of_one_part_and_the_same_parts_merged_are_found_once(
    summaries: list[Digest],
) -> None:
    a, b = digest(10, 20), digest(30)
    rows = RowValues(NOW)
    assert rows.part([a]) is a
    both = rows.part([a, b])
    assert rows.part([a, b]) is both
    assert both.to_json() == merge_digests([a, b]).to_json()
    assert rows.part([b, a]) is not both  # other parts (by identity and order): merged anew
    assert rows.new(both, CLOSED) is rows.new(both, CLOSED)
    assert rows.new(a, CLOSED) == rollup_values(a, NOW)
    assert len(summaries) == 2


@pytest.mark.parametrize(
    ("key", "closed"),
    [
        (CLOSED, True),  # ended at NOW
        (OPEN, False),  # began at NOW
        ((1, "eu", 300, NOW - timedelta(minutes=4)), False),
        ((1, "*", 86400, NOW - timedelta(days=1)), True),
    ],
)
def test_a_row_keeps_its_quantiles_once_its_period_has_closed(
    key: tuple[int, str, int, datetime], closed: bool
) -> None:
    part, before = digest(10, 20, 30), digest(5, 15)
    rows = RowValues(NOW)
    merged, new = rows.merged(stored(before), part, key), rows.new(part, key)
    assert coarse.closed(key, NOW) is closed
    for found, alone in (
        (merged, merged_alone(stored(before), part)),
        (new, rollup_values(part, NOW)),
    ):
        assert ("summary" in found["digest"]) is closed
        assert (found["total_p50"] is not None) is closed
        # The sketches and counts are the same either way: a read finds the same quantiles.
        assert {k: v for k, v in found["digest"].items() if k != "summary"} == {
            k: v for k, v in alone["digest"].items() if k != "summary"
        }
        assert (found["runs"], found["n"]) == (alone["runs"], alone["n"])


def test_one_part_in_an_open_and_a_closed_row_gets_each_its_own_values() -> None:
    part = digest(10, 20)
    rows = RowValues(NOW)
    assert "summary" not in rows.new(part, OPEN)["digest"]
    assert "summary" in rows.new(part, CLOSED)["digest"]


def test_rows_merged_together_get_the_values_each_gets_alone(summaries: list[Digest]) -> None:
    """``merged_all``: the closed rows' quantiles found in one pass, open rows without them,
    equal inputs found once, and every row's values as ``merged`` finds them alone."""
    parts = [digest(10, 20, 30), digest(7, 8), digest(400)]
    documents = [stored(digest(5, 15)), stored(digest(1000, 2000)), stored(Digest())]
    keys = [CLOSED, OPEN, (1, "*", 86400, NOW - timedelta(days=1))]
    rows = [(d, p, k) for d in documents for p in parts for k in keys]
    rows += rows[:5]  # equal inputs again
    together = RowValues(NOW).merged_all(rows)
    distinct = {(repr(d), id(p), coarse.closed(k, NOW)) for d, p, k in rows}
    assert len(summaries) == len(distinct)  # an open row's and a closed row's differ
    for (document, part, key), found in zip(rows, together, strict=True):
        assert found == RowValues(NOW).merged(document, part, key)
        assert ("summary" in found["digest"]) is coarse.closed(key, NOW)
