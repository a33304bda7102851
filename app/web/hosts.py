"""Which names the server answers to: the ``Host`` allow-list, against DNS rebinding.

A web page can point a name it controls at 127.0.0.1 (DNS rebinding); the visitor's browser
then sends that page's requests to the loopback dashboard and lets the page read the answers,
as if they were its own site's. The one thing that tells such a request apart is its
``Host`` header, which carries the attacker's name. So a server bound to loopback answers
only to loopback names (``localhost``, ``127.0.0.1``, ``[::1]`` and the address it binds)
and every other ``Host`` gets 400. ``PHASEWATCH_ALLOWED_HOSTS`` replaces the list (say, with
the name a proxy forwards); a server bound beyond loopback, whose names phasewatch cannot
know, answers to any unless it is set.
"""

from __future__ import annotations

from app.config import Settings
from app.web.auth import is_loopback

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
ANY = "*"


def allowed_hosts(settings: Settings) -> list[str]:
    """The names TrustedHostMiddleware accepts (``*``: any)."""
    if settings.allowed_hosts is not None:
        return list(settings.allowed_hosts)
    if not is_loopback(settings.host):
        return [ANY]
    return list(dict.fromkeys([*LOOPBACK_NAMES, host_name(settings.host)]))


def host_name(address: str) -> str:
    """An address as a Host header names it: IPv6 in brackets, lower case."""
    bare = address.strip().strip("[]").lower()
    return f"[{bare}]" if ":" in bare else bare
