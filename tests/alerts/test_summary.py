"""The sentence an alert carries, from its numbers: what a person reads in a notification
and on the dashboard, beside the breakdown it must agree with."""

from __future__ import annotations

from typing import Any

import pytest

from app.alerts.identity import Identity
from app.alerts.summary import summarize_alert

SHIFT_NUMBERS = {"from_share_pct": 8.0, "to_share_pct": 36.6, "lead_pp": 28.6}


@pytest.mark.parametrize(
    ("vantage", "extra", "said"),
    [
        (  # the new leader still leads: the sentence as it fired
            "eu",
            {"top": ["network", 36.6]},
            "dominant phase moved on chat: generation 8 % → network 36.6 % (lead 28.6 pp) at eu",
        ),
        (  # a third phase has overtaken it since: said, after where it was seen
            "eu",
            {"top": ["queue", 50.1]},
            "dominant phase moved on chat: generation 8 % → network 36.6 % (lead 28.6 pp) at eu;"
            " queue leads now (50.1 %)",
        ),
        (  # across vantages: at the vantage where it happened
            None,
            {
                "vantages_agreeing": 2,
                "vantages": 2,
                "leaders": {"new": ["network", 36.6], "old": ["network", 45.1]},
                "tops": {"new": ["queue", 50.1], "old": ["network", 45.1]},
            },
            "dominant phase moved on chat: generation 8 % → network 36.6 % (lead 28.6 pp) at"
            " 2/2 vantages; queue leads now at new (50.1 %)",
        ),
        (  # numbers stored before "top" existed read as they always did
            "eu",
            {},
            "dominant phase moved on chat: generation 8 % → network 36.6 % (lead 28.6 pp) at eu",
        ),
    ],
)
def test_a_rewritten_shift_sentence_names_the_phase_that_leads_now(
    vantage: str | None, extra: dict[str, Any], said: str
) -> None:
    scope = "vantage" if vantage else "service"
    identity = Identity("dominant_shift", "chat", vantage, scope, "generation", "network")
    assert summarize_alert(identity, SHIFT_NUMBERS | extra) == said
