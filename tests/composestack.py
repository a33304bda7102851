"""docker-compose.yml brought up for real: images from this checkout, a project of its own.

``.ci/compose/build`` makes the images (no registry: a debootstrapped Debian base, the host's
wheels); ``Stack`` runs ``docker-compose.yml`` with ``.ci/compose/ci.yml`` over it, under a
project name of its own, so its containers and volumes are its alone and ``down -v`` removes
every one. phasewatch's port is published on 127.0.0.1 only and is all the test talks to.

Without Docker the tests skip, or fail when ``PHASEWATCH_REQUIRE_DOCKER=1`` (as in CI, where
``.ci/compose/setup`` installs and starts it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import eventually

ROOT = Path(__file__).parent.parent
COMPOSE_FILES = ("-f", str(ROOT / "docker-compose.yml"), "-f", str(ROOT / ".ci/compose/ci.yml"))
IMAGE = "phasewatch:ci"
POSTGRES_IMAGE = "phasewatch-ci-postgres:15"
BUILD_TIMEOUT_S = 600.0
COMMAND_TIMEOUT_S = 120.0
TOKEN = "compose-test-token"


def docker_or_skip() -> None:
    """Skip (or fail, where Docker is required) unless a Docker daemon and Compose answer."""
    problem = _docker_problem()
    if problem is None:
        return
    if os.environ.get("PHASEWATCH_REQUIRE_DOCKER") == "1":
        pytest.fail(f"{problem}; PHASEWATCH_REQUIRE_DOCKER=1 forbids skipping", pytrace=False)
    pytest.skip(problem)


def _docker_problem() -> str | None:
    for tool in ("/usr/bin/docker", "docker-compose"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (.ci/compose/setup installs it)"
    info = subprocess.run(["/usr/bin/docker", "info"], capture_output=True, timeout=30)
    if info.returncode != 0:
        return "the Docker daemon does not answer (.ci/compose/setup starts it)"
    return None


def build_images() -> None:
    """The images of this checkout, as ``.ci/compose/build`` makes them."""
    env = os.environ | {"PYTHON": sys.executable, "PHASEWATCH_IMAGE": IMAGE}
    env["PHASEWATCH_POSTGRES_IMAGE"] = POSTGRES_IMAGE
    subprocess.run([str(ROOT / ".ci/compose/build")], env=env, check=True, timeout=BUILD_TIMEOUT_S)


class Stack:
    """One compose project: ``up``, ``compose(...)`` for anything else, ``down`` removes all."""

    def __init__(self, workdir: Path, port: int) -> None:
        self.project = f"pwtest{uuid.uuid4().hex[:8]}"
        self.base_url = f"http://127.0.0.1:{port}"
        self.env = os.environ | {
            "PHASEWATCH_IMAGE": IMAGE,
            "PHASEWATCH_POSTGRES_IMAGE": POSTGRES_IMAGE,
            "PHASEWATCH_PUBLISHED_PORT": str(port),
            "PHASEWATCH_API_TOKEN": TOKEN,
            "POSTGRES_PASSWORD": uuid.uuid4().hex,
            "CI_TARGETS_FILE": str(workdir / "phasewatch.yaml"),
        }

    def compose(self, *args: str, env: Mapping[str, str] | None = None) -> str:
        """``docker-compose ARGS`` in this project (with ``env`` instead of the stack's)."""
        command = ["docker-compose", "-p", self.project, *COMPOSE_FILES, *args]
        done = subprocess.run(
            command,
            env=self.env if env is None else env,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
        )
        if done.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed:\n{done.stdout}{done.stderr}")
        return done.stdout

    def container(self, service: str) -> str:
        return self.compose("ps", "-q", service).strip()

    def health(self, service: str) -> str:
        found = subprocess.run(
            ["/usr/bin/docker", "inspect", "--format", "{{json .State}}", self.container(service)],
            capture_output=True,
            text=True,
            timeout=30,
        )
        state: dict[str, Any] = json.loads(found.stdout or "{}")
        return str(state.get("Health", {}).get("Status", state.get("Status", "absent")))

    def get(self, path: str, **params: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        return httpx.get(self.base_url + path, params=params, headers=headers, timeout=10)

    def logs(self) -> str:
        return self.compose("logs", "--no-color", "--tail", "80")

    def down(self) -> None:
        self.compose("down", "-v", "--remove-orphans", "--timeout", "10")


def wait_for(check: Callable[[], bool], within_s: float, what: str) -> None:
    """``eventually``, with a service that is restarting or not up yet counting as "not yet"."""

    def answered() -> bool:
        try:
            return check()
        except (httpx.TransportError, AssertionError):
            return False

    eventually(answered, within_s, what)
