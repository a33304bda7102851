"""Pooled PostgreSQL connections looked at before use once they have idled: one the
server dropped meanwhile is replaced (``make_engine`` listens with these); and one returned
to a pool already disposed of is closed."""

from __future__ import annotations

import select
import time
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.exc import DisconnectionError

# A pooled connection may have died while idle (the server restarted, an administrator
# ended it, the kernel's keepalives gave up on it): one that idled longer than this is
# looked at before use, and replaced if it is gone. Looking costs no round trip: a server
# sends an idle connection nothing, so anything to read on its socket (the server's
# goodbye, the end of the stream, an error) means it is gone. A ping (BEGIN, SELECT 1,
# ROLLBACK) cost every checkout three round trips, most of what an idle serve sent the
# database. A connection in steady use that dies, or one whose peer vanished without a
# word, fails its statement instead, which every caller takes as transient.
PING_AFTER_IDLE_S = 2.0
_GONE = select.POLLIN | select.POLLERR | select.POLLHUP


def stamp_checkin(_dbapi_connection: Any, record: Any) -> None:
    record.info["checked_in_at"] = time.monotonic()


def replace_if_dropped(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
    idle_since = record.info.get("checked_in_at")
    if idle_since is None or time.monotonic() - idle_since < PING_AFTER_IDLE_S:
        return
    if dropped_while_idle(dbapi_connection):  # the pool tries another
        raise DisconnectionError("idle connection lost: the server closed it")


def dropped_while_idle(dbapi_connection: Any) -> bool:
    """Whether an idle psycopg connection is gone (without a round trip)."""
    if dbapi_connection.closed:
        return True
    try:
        fd = dbapi_connection.pgconn.socket
    except Exception:  # the driver's error: no socket left
        return True
    poller = select.poll()
    poller.register(fd, _GONE)
    return bool(poller.poll(0))


def close_late_returns(engine: Engine) -> Engine:
    """``engine``, whose pools close a connection returned to them once disposed of.

    ``Engine.dispose`` closes the connections in its pool and makes a new one; a connection
    out at that moment (a thread left behind, a read that outlived a test) goes back to the
    old pool on its return and stays open there, until the garbage collector frees that
    pool's cycle of records some time later, anywhere in the process."""
    current = [engine.pool]

    def disposed(_engine: Engine) -> None:
        event.listen(current[0], "checkin", close_returned)
        current[0] = engine.pool

    event.listen(engine, "engine_disposed", disposed)
    return engine


def close_returned(dbapi_connection: Any, _record: Any) -> None:
    if dbapi_connection is not None:  # None: invalidated, already closed
        dbapi_connection.close()
