"""prometheus-client's private parts that /metrics counts a run's times with
(app.runtime.promcompat): the installed version still has them, and counting a run's values
in one go gives the numbers observing them one by one gives."""

from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry, Histogram

from app.runtime.promcompat import counted, observe_many

BUCKETS = (0.01, 0.1, 1.0, 10.0)
VALUES = {
    "inside the buckets": [0.005, 0.05, 0.5, 5.0],
    "on a bound": [0.01, 0.1, 1.0, 10.0],
    "above every bound": [11.0, 1e9, math.inf],
    "zero and negative": [0.0, -1.0],
    "not a number": [math.nan, 0.5],
    "one value": [0.2],
    "none": [],
    "many in one bucket": [0.3] * 50,
}


def histograms() -> tuple[CollectorRegistry, Histogram, Histogram]:
    registry = CollectorRegistry()
    one = Histogram("one_by_one", "", ("series",), buckets=BUCKETS, registry=registry)
    many = Histogram("many_at_once", "", ("series",), buckets=BUCKETS, registry=registry)
    return registry, one, many


def numbers(registry: CollectorRegistry, name: str) -> dict[str, float]:
    """The family's samples but its creation time (a clock reading, not a count)."""
    (family,) = [m for m in registry.collect() if m.name == name]
    return {f"{s.name}{s.labels}": s.value for s in family.samples if s.name != f"{name}_created"}


def test_the_installed_version_is_counted_in_one_go() -> None:
    _, one, _ = histograms()
    assert counted(one.labels("a"))


@pytest.mark.parametrize("values", VALUES.values(), ids=VALUES.keys())
def test_counting_in_one_go_gives_what_observing_one_by_one_gives(values: list[float]) -> None:
    registry, one, many = histograms()
    one.labels("a"), many.labels("a")
    for _ in range(2):  # onto counts already there, too
        for value in values:
            one.labels("a").observe(value)
        observe_many(many.labels("a"), values)
    found = numbers(registry, "many_at_once")
    expected = numbers(registry, "one_by_one")
    assert found.keys() == {k.replace("one_by_one", "many_at_once") for k in expected}
    for key, value in expected.items():
        got = found[key.replace("one_by_one", "many_at_once")]
        if math.isnan(value):
            assert math.isnan(got)
        else:
            assert got == pytest.approx(value, rel=1e-12, abs=1e-15), key
