"""A target's connect split over a window, and the note when it moved: table-driven."""

from __future__ import annotations

from typing import Any

import pytest

from app.analysis.connectsplit import ConnectSplit, connect_moved, split_of


def detail(dns: float, tcp: float, tls: float, family: str = "ipv4") -> dict[str, Any]:
    return {"connect_split": {"dns": dns, "tcp": tcp, "tls": tls}, "address_family": family}


def test_the_split_is_each_parts_median_over_fresh_connections_only() -> None:
    details = [
        detail(1, 2, 30),
        detail(3, 2, 10),
        detail(2, 4, 20, "ipv6"),
        {"connect_split": None, "address_family": "ipv4"},  # a reused connection
        {},  # a sample stored before the split existed
    ]
    assert split_of(details) == ConnectSplit(
        n=3, medians={"dns": 2.0, "tcp": 2.0, "tls": 20.0}, families={"ipv4": 2, "ipv6": 1}
    )
    assert split_of([{}, {"connect_split": None}]) is None


def window(dns: float, tcp: float, tls: float, n: int = 5, family: str = "ipv4") -> ConnectSplit:
    return ConnectSplit(n, {"dns": dns, "tcp": tcp, "tls": tls}, {family: n})


@pytest.mark.parametrize(
    ("before", "after", "text"),
    [
        (window(1, 2, 20), window(1, 2, 21), None),  # nothing moved
        (None, window(90, 2, 20), None),  # nothing to compare with
        (window(1, 2, 20, n=2), window(90, 2, 20), None),  # too few connections before
        (window(1, 2, 20), window(90, 2, 20, n=2), None),  # … or after
        # A slow resolver now holds connect, where the handshake did.
        (
            window(1, 2, 20),
            window(90, 2, 20),
            "connect moved from tls to dns: dns 1.0 → 90.0 ms median, tls 20.0 → 20.0 ms"
            " (5 new connections against 5)",
        ),
        # The handshake got faster and left a sliver of DNS the largest: no growth, no note.
        (window(1.0, 0.5, 20), window(1.2, 0.5, 0.9), None),
        # Another part largest by a loopback's jitter only.
        (window(0.2, 0.3, 0.1), window(0.4, 0.3, 0.1), None),
        # A route that times out over IPv6 now shows in tcp.
        (
            window(1, 2, 20),
            window(1, 250, 20),
            "connect moved from tls to tcp: tcp 2.0 → 250.0 ms median, tls 20.0 → 20.0 ms"
            " (5 new connections against 5)",
        ),
        # Same part, another family.
        (
            window(1, 2, 20),
            window(1, 2, 21, family="ipv6"),
            "new connections now reach ipv6, before ipv4",
        ),
    ],
)
def test_connect_moved(
    before: ConnectSplit | None, after: ConnectSplit | None, text: str | None
) -> None:
    note = connect_moved(before, after)
    assert (note.text if note else None) == text
    if note is not None:
        assert note.kind == "connect_moved"
