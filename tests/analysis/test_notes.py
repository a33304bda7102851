"""A run's notes: what its numbers alone would hide."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from app.analysis.notes import first_sample_outlier
from app.analysis.summary import summarize


@dataclass
class S:
    total_ms: float
    phases: dict[str, float] = field(default_factory=dict)
    status: str = "ok"


def run(*totals: float, first_connect: float = 0.0) -> list[S]:
    samples = [S(t, {"connect": 0.0, "queue": t - 10, "generation": 10.0}) for t in totals]
    samples[0].phases["connect"] = first_connect
    samples[0].total_ms += first_connect
    return samples


def test_a_first_sample_no_other_repeats_is_noted_with_the_phase_it_spent_in() -> None:
    """llama.cpp without a nonce: a 1,200-token prompt's prefill in sample 0 only."""
    note = first_sample_outlier(run(850, 31, 30, 29, 33, 30))
    assert note is not None and note.kind == "first_sample_outlier"
    assert "850 ms" in note.text and "25.8x" in note.text and "in queue" in note.text
    assert "{{nonce}}" in note.text


@pytest.mark.parametrize(
    ("samples", "why"),
    [
        (run(60, 31, 30, 29, 33, 30), "not 2x the slowest other"),
        (run(731, 343, 250, 260, 300), "2x the slowest, not 3x their median: a busy machine"),
        (run(15, 5, 6, 5, 6, 5), "3x their median, but only 9 ms more"),
        (run(850, 31, 30, 29, 600, 30), "another sample repeats it"),
        (run(850, 31, 30, 29), "too few others to tell"),
        (run(40, 31, 30, 29, 33, 30, first_connect=500), "a new connection is connect's"),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_no_note_without_an_outlier_the_rest_never_repeat(samples: list[S], why: str) -> None:
    assert first_sample_outlier(samples) is None, why


def test_a_failed_first_sample_is_no_outlier() -> None:
    samples = run(850, 31, 30, 29, 33, 30)
    samples[0].status = "error"
    assert first_sample_outlier(samples) is None


def test_a_runs_summary_carries_its_notes_and_a_windows_does_not() -> None:
    samples = run(850, 31, 30, 29, 33, 30)
    assert [n["kind"] for n in summarize(samples).to_json()["notes"]] == ["first_sample_outlier"]
    assert summarize(samples, one_run=False).notes == ()
    assert summarize(run(31, 30, 29, 33, 30)).to_json()["notes"] == []
