"""Every error the API answers, in one shape, and its description in the OpenAPI document.

An error is ``{"detail": "<a sentence>"}``; a request that fails validation also lists each
problem in ``errors`` (``loc``, ``msg``, ``type``, as pydantic reports them). Routes declare
the errors they can answer with ``responses=errors(404, 422, not_found="No run has this id.")``
so the document says what the server does; ``install(app)`` makes the answers match it.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import iter_route_contexts
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException

Responses = dict[int | str, dict[str, Any]]


class FieldError(BaseModel):
    loc: list[str | int] = Field(description="where: query, path or body, then the field")
    msg: str
    type: str


class ErrorOut(BaseModel):
    detail: str = Field(description="what is wrong, as a sentence")
    errors: list[FieldError] | None = Field(
        None, description="each problem of a request that failed validation"
    )


DESCRIPTIONS = {
    400: "The Host header names no allowed host (text/plain), or the body cannot be read.",
    401: "The bearer token is missing or wrong (see WWW-Authenticate).",
    403: "Writes are disabled: not bound to loopback and no PHASEWATCH_API_TOKEN.",
    404: "Not found.",
    409: "The request conflicts with the resource's state.",
    422: "The request is not valid: `detail` says why, `errors` lists each problem.",
    503: "The database does not answer now (stopped, unreachable, frozen): `detail` says how;"
    " ask again after `Retry-After` seconds.",
}
_PLAIN = {"text/plain": {"schema": {"type": "string"}}}


def errors(*codes: int, not_found: str | None = None, conflict: str | None = None) -> Responses:
    """The ``responses=`` of a route that can answer these error codes."""
    described = DESCRIPTIONS | {404: not_found or DESCRIPTIONS[404]}
    described[409] = conflict or DESCRIPTIONS[409]
    found: Responses = {}
    for code in codes:
        found[code] = {"model": ErrorOut, "description": described[code]}
        if code == 400:
            found[code]["content"] = _PLAIN
    return found


def install(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _invalid)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, _http_error)  # type: ignore[arg-type]


async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
    found = [_field_error(error) for error in exc.errors()]
    detail = "; ".join(f"{'.'.join(map(str, e.loc))}: {e.msg}" for e in found)
    body = ErrorOut(detail=detail or "the request is not valid", errors=found)
    return JSONResponse(body.model_dump(mode="json"), status_code=422)


def _field_error(error: Any) -> FieldError:
    # Never the input: it may be long, or a secret sent in the wrong field.
    loc = [part if isinstance(part, int) else str(part) for part in error.get("loc", ())]
    return FieldError(loc=loc, msg=str(error.get("msg", "")), type=str(error.get("type", "")))


async def _http_error(request: Request, exc: HTTPException) -> Response:
    if exc.status_code == 405:
        # Starlette names the methods of the first route on the path; the path has more.
        exc = HTTPException(405, exc.detail, headers={"Allow": _allowed(request)})
    return await http_exception_handler(request, exc)


def _allowed(request: Request) -> str:
    methods: set[str] = set()
    for route in iter_route_contexts(request.app.routes):
        pattern = getattr(route, "path_regex", None)
        if route.methods and pattern is not None and pattern.match(request.url.path):
            methods |= route.methods
    return ", ".join(sorted(methods))
