"""Fixtures of the store's tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, event


@pytest.fixture
def sample_reads(engine: Engine) -> Iterator[list[str]]:
    """Every statement that reads the samples table while the test runs."""
    seen: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.startswith("SELECT") and "FROM samples" in statement:
            seen.append(statement)

    event.listen(engine, "before_cursor_execute", count)
    yield seen
    event.remove(engine, "before_cursor_execute", count)
