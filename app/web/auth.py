"""Who may change things: writes to the API need ``Authorization: Bearer <PHASEWATCH_API_TOKEN>``.

With no token configured, writes are allowed only while the server binds a loopback
address (one person's laptop); ``phasewatch serve`` refuses to bind anything else without a
token. Reads need no token (a what-if too: a POST only for its body, it changes nothing).
Every write route takes the one dependency ``WriteAccess``:

    @router.post("/things", dependencies=[WriteAccess])
"""

from __future__ import annotations

import ipaddress
import secrets
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.config import Settings
from app.web.deps import ServiceDep
from app.web.errors import errors

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_bearer = HTTPBearer(
    auto_error=False,
    description="PHASEWATCH_API_TOKEN; needed for every write (POST, PUT, PATCH, DELETE).",
)


def is_loopback(host: str) -> bool:
    """``127.0.0.1``, ``::1``, ``localhost``: only this machine can connect."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name could resolve anywhere


def configured_token(settings: Settings) -> str | None:
    """The API token, or None when there is none (unset, empty or only white space).

    Stripped: a header value loses its surrounding white space on the way, so a token with
    some could never match, and one of white space alone would leave the API open."""
    if settings.api_token is None:
        return None
    return settings.api_token.get_secret_value().strip() or None


def writes_open(settings: Settings) -> bool:
    """No token, bound to loopback: writes need no credentials."""
    return configured_token(settings) is None and is_loopback(settings.host)


def document_open_writes(app: FastAPI, settings: Settings) -> None:
    """Where writes are open, the OpenAPI document says the token is optional (an empty
    requirement beside the bearer one); otherwise it would ask clients for one."""
    if not writes_open(settings):
        return
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            for path in build()["paths"].values():
                for operation in path.values():
                    if "security" in operation:
                        operation["security"].append({})
        return app.openapi_schema or build()

    app.openapi = openapi  # type: ignore[method-assign]


def token_matches(given: str, expected: str) -> bool:
    # Constant time: how long a comparison takes must not tell how much of a guess was right.
    return secrets.compare_digest(given.encode(), expected.encode())


def require_write_access(
    service: ServiceDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    expected = configured_token(service.settings)
    if expected is None:
        if writes_open(service.settings):
            return
        raise HTTPException(
            status.HTTP_403_FORBIDDEN,
            "writes are disabled: this server is not bound to loopback and has no "
            "PHASEWATCH_API_TOKEN",
        )
    if credentials is None:
        raise _unauthorized("a bearer token is required for writes", error=None)
    if not token_matches(credentials.credentials, expected):
        raise _unauthorized("the bearer token is not valid", error="invalid_token")


def _unauthorized(detail: str, error: str | None) -> HTTPException:
    challenge = 'Bearer realm="phasewatch"'
    if error is not None:
        challenge += f', error="{error}"'
    return HTTPException(
        status.HTTP_401_UNAUTHORIZED, detail, headers={"WWW-Authenticate": challenge}
    )


WriteAccess = Depends(require_write_access)
# What a write route can answer because of WriteAccess, for its ``responses=``.
WRITE_ERRORS = errors(401, 403)
