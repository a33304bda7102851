"""IN lists padded to a power of two: few statement texts, the same rows."""

from __future__ import annotations

import pytest

from app.store.inlists import padded


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], []),
        (["a"], ["a"]),
        (["a", "b"], ["a", "b"]),
        (["a", "b", "c"], ["a", "b", "c", "c"]),
        (["a", "b", "c", "d"], ["a", "b", "c", "d"]),
        (["a", "b", "c", "d", "e"], ["a", "b", "c", "d", "e", "e", "e", "e"]),
        (list(range(500)), [*range(500), *[499] * 12]),
        (list(range(512)), list(range(512))),
    ],
)
def test_a_list_is_padded_with_its_last_value_to_a_power_of_two(
    values: list[object], expected: list[object]
) -> None:
    assert padded(values) == expected


def test_lengths_one_to_a_thousand_make_eleven_lengths() -> None:
    assert len({len(padded(range(n))) for n in range(1, 1001)}) == 11
