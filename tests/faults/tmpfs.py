"""A spool on a small tmpfs of the process's own: mounted in a mount namespace of its own
(``unshare``), so a test needs no mount on the machine and leaves none; its files are seen
through ``/proc/<pid>/root``."""

from __future__ import annotations

import os
from pathlib import Path


def tmpfs(size: str) -> str:
    """The setup of a tmpfs of ``size`` on the directory ``$1``, its ``inflight/`` made."""
    return f'mount -t tmpfs -o size={size} tmpfs "$1" && mkdir "$1/inflight"'


def in_own_mount_namespace(setup: str, directory: Path) -> tuple[str, ...]:
    """A wrapper that runs ``setup`` (``$1`` is ``directory``) and then execs the rest."""
    # As root a mount namespace is enough; anyone else maps themselves to root in a user
    # namespace of their own, where mounting a tmpfs is allowed.
    user = () if os.geteuid() == 0 else ("--map-root-user",)
    script = f'{setup} 2>/dev/null && shift && exec "$@"'
    return ("unshare", "--mount", *user, "--", "sh", "-c", script, "sh", str(directory))


def seen_by(pid: int, path: Path) -> Path:
    """``path`` as the process ``pid`` sees it (inside its mount namespace)."""
    return Path(f"/proc/{pid}/root") / path.relative_to("/")
