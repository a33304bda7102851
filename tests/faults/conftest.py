"""Fixtures for the fault tests: real ``serve`` processes, a simulated endpoint, and a
private PostgreSQL cluster to stop, freeze and restart (``tests/pgcluster.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.pgcluster import PgCluster, Serve, private_cluster, serving
from tests.runtime.test_serve import served  # noqa: F401  (a fixture, found by name)


@pytest.fixture
def cluster() -> Iterator[PgCluster]:
    with private_cluster() as started:
        yield started


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Serve]]:
    with serving(tmp_path) as start:
        yield start
