"""Why the server does not take an agent's push, each with the status the agent is answered.

The statuses are the wire contract (the agent's client reads 429 and 503 as "away for now,
push again", any other 4xx as "refused for good"), so they are decided here, beside the
reasons, and the route only carries them::

    PushRefused
    ├── NotYours       403  a run of another vantage, or of a target not assigned to it
    ├── TooLarge       413  more than the server reads, sent or decompressed
    ├── NotGzip        415  an encoding other than gzip or identity
    ├── Unreadable     422  not JSON, not gzip, not a run, not a batch; a run the door
    │                       refuses (app.runs.validate: the field and why)
    ├── OverLimit      429  faster than the vantage's push limit   (Retry-After: 1)
    └── StoreAway      503  the database is away or has no schema  (Retry-After: 5)

(401, no token or the wrong one, is the route's: it is answered before any of this.)
"""

from __future__ import annotations


class PushRefused(Exception):
    status = 400
    retry_after: str | None = None

    def headers(self) -> dict[str, str] | None:
        return None if self.retry_after is None else {"Retry-After": self.retry_after}


class NotYours(PushRefused):
    status = 403


class TooLarge(PushRefused):
    status = 413


class NotGzip(PushRefused):
    status = 415


class Unreadable(PushRefused):
    status = 422


class OverLimit(PushRefused):
    status = 429
    retry_after = "1"


class StoreAway(PushRefused):
    status = 503
    retry_after = "5"
