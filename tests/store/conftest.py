"""Fixtures of the store's tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, event


def reads_of(engine: Engine, table: str) -> Iterator[list[str]]:
    """Every SELECT from ``table`` sent while the fixture made of this lives."""
    seen: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.startswith("SELECT") and f"FROM {table}" in statement:
            seen.append(statement)

    event.listen(engine, "before_cursor_execute", count)
    yield seen
    event.remove(engine, "before_cursor_execute", count)


@pytest.fixture
def sample_reads(engine: Engine) -> Iterator[list[str]]:
    """Every statement that reads the samples table while the test runs."""
    yield from reads_of(engine, "samples")


@pytest.fixture
def run_reads(engine: Engine) -> Iterator[list[str]]:
    """Every statement that reads the runs table while the test runs."""
    yield from reads_of(engine, "runs")
