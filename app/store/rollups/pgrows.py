"""Rollup rows read under lock and updated on PostgreSQL, their keys as arrays.

The portable statements name every key in an IN list of (target, vantage, period, start)
tuples: a run touches ten rows, a catch-up batch hundreds, so each batch's SQL text was a
new one of thousands of parameters, that psycopg split and SQLAlchemy expanded again
every time (a quarter of the rollups' CPU in ``serve``, bench/fleet.py). Here the keys
travel as four arrays that ``unnest`` pairs up again: one SQL text whatever the batch, a
handful of parameters, prepared by the server after a few uses.

Rows are locked in key order, as the portable read locks them (``ORDER BY`` under
``FOR UPDATE``), so two writers never deadlock whichever way each took.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from app.store.db import json_dumps_text

RollupKey = tuple[int, str, int, datetime]

_KEYS = (
    "unnest(%(t)s::integer[], %(v)s::text[], %(p)s::integer[], %(s)s::timestamptz[])"
    " AS k(target_id, vantage, period_s, period_start)"
)
_MATCH = (
    "r.target_id = k.target_id AND r.vantage = k.vantage"
    " AND r.period_s = k.period_s AND r.period_start = k.period_start"
)
_LOCKED = f"""
    SELECT r.target_id, r.vantage, r.period_s, r.period_start, r.digest
    FROM rollups AS r JOIN {_KEYS} ON {_MATCH}
    ORDER BY r.target_id, r.vantage, r.period_s, r.period_start
    FOR UPDATE OF r"""
_PRESENT = f"""
    SELECT r.target_id, r.vantage, r.period_s, r.period_start
    FROM rollups AS r JOIN {_KEYS} ON {_MATCH}"""
# The new values as one JSON array of rows (one orjson call; psycopg's text arrays escape
# each element's JSON in Python), unpacked by the server as ``app.store.ingest`` does.
_UPDATE = f"""
    UPDATE rollups AS r
    SET runs = k.runs, n = k.n, total_p50 = k.total_p50, digest = k.digest,
        updated_at = %(now)s
    FROM jsonb_to_recordset(%(rows)s::jsonb)
         AS k(target_id integer, vantage text, period_s integer, period_start timestamptz,
              runs integer, n integer, total_p50 float8, digest jsonb)
    WHERE {_MATCH}"""

# New rows likewise, one JSON array whatever the batch (a many-row INSERT's text of hundreds
# of parameters was parsed again by psycopg at every batch): as ``insert_unless_present``,
# a row already there (or listed twice) is skipped and not returned.
_NEW_DIGESTS = """
    INSERT INTO run_digests (run_id, target_id, vantage, started_at, digest)
    SELECT k.run_id, k.target_id, k.vantage, k.started_at, k.digest
    FROM jsonb_to_recordset(%(rows)s::jsonb)
         AS k(run_id uuid, target_id integer, vantage text, started_at timestamptz, digest jsonb)
    ON CONFLICT (run_id) DO NOTHING
    RETURNING run_id"""
_NEW_ROWS = """
    INSERT INTO rollups (target_id, vantage, period_s, period_start, runs, n, total_p50,
                         digest, updated_at)
    SELECT k.target_id, k.vantage, k.period_s, k.period_start, k.runs, k.n, k.total_p50,
           k.digest, k.updated_at
    FROM jsonb_to_recordset(%(rows)s::jsonb)
         AS k(target_id integer, vantage text, period_s integer, period_start timestamptz,
              runs integer, n integer, total_p50 float8, digest jsonb, updated_at timestamptz)
    ON CONFLICT (target_id, vantage, period_s, period_start) DO NOTHING
    RETURNING target_id, vantage, period_s, period_start"""


def new_digests(connection: Connection, rows: Sequence[dict[str, Any]]) -> set[Any]:
    """Insert run digests (``digests.digest_values``) not there yet; the run ids inserted."""
    return {run_id for (run_id,) in connection.exec_driver_sql(_NEW_DIGESTS, _rows(rows))}


def new_rows(connection: Connection, rows: Sequence[dict[str, Any]]) -> set[RollupKey]:
    """Insert rollup rows (key columns and ``rollup_values``) not there yet; their keys."""
    return {(t, v, p, s) for t, v, p, s in connection.exec_driver_sql(_NEW_ROWS, _rows(rows))}


def _rows(rows: Sequence[dict[str, Any]]) -> dict[str, str]:
    return {"rows": json_dumps_text(list(rows))}


def _arrays(keys: Sequence[RollupKey]) -> dict[str, list[Any]]:
    return {
        "t": [key[0] for key in keys],
        "v": [key[1] for key in keys],
        "p": [key[2] for key in keys],
        "s": [key[3] for key in keys],
    }


def present(connection: Connection, keys: Sequence[RollupKey]) -> set[RollupKey]:
    """Which of ``keys`` have a row (no lock)."""
    rows = connection.exec_driver_sql(_PRESENT, _arrays(keys))
    return {(t, v, p, s) for t, v, p, s in rows}


def locked(connection: Connection, keys: Sequence[RollupKey]) -> dict[RollupKey, Any]:
    """The digest documents of ``keys``' rows, each row locked until the transaction ends."""
    rows = connection.exec_driver_sql(_LOCKED, _arrays(keys))
    return {(t, v, p, s): digest for t, v, p, s, digest in rows}


def update(
    connection: Connection, keys: Sequence[RollupKey], values: Sequence[dict[str, Any]]
) -> None:
    """Each key's row set to its ``rollup_values`` (one ``updated_at``: the first's)."""
    if not keys:
        return
    rows = [
        {
            "target_id": key[0],
            "vantage": key[1],
            "period_s": key[2],
            "period_start": key[3],
            "runs": row["runs"],
            "n": row["n"],
            "total_p50": row["total_p50"],
            "digest": row["digest"],
        }
        for key, row in zip(keys, values, strict=True)
    ]
    params = {"rows": json_dumps_text(rows), "now": values[0]["updated_at"]}
    connection.exec_driver_sql(_UPDATE, params)
