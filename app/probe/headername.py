"""Header names HTTP can send: RFC 9110's ``token`` (section 5.6.2). httpx's h11 refuses
anything else at request time, so every sample of a run, or every delivery of a notifier,
would fail; the targets file refuses it instead, naming the line."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
HEADER_NAME_PROBLEM = (
    "is not a header name: RFC 9110 allows letters, digits and !#$%&'*+-.^_`|~, "
    "no spaces, colons or other characters"
)


def is_header_name(name: str) -> bool:
    return _TOKEN.fullmatch(name) is not None


def _checked(name: str) -> str:
    if not is_header_name(name):
        raise ValueError(f"{name!r} {HEADER_NAME_PROBLEM}")
    return name


# A dict key of this type is refused at ``headers.<name>``, the line of the name itself.
HeaderName = Annotated[str, AfterValidator(_checked)]
