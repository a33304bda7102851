"""docker-compose.yml brought up for real: images from this checkout, a project of its own.

``.ci/compose/build`` makes the images (no registry: a debootstrapped Debian base, the host's
wheels), tagged with a digest of what they are built from: a second run on the same tree
reuses them, as even a fully cached build re-makes the wheelhouse and re-sends the context.
``Stack`` runs ``docker-compose.yml`` with ``.ci/compose/ci.yml`` over it, under a project
name of its own, so its containers and volumes are its alone and ``down -v`` removes
every one. phasewatch's port is published on 127.0.0.1 only and is all the test talks to.

Without Docker the tests skip, or fail when ``PHASEWATCH_REQUIRE_DOCKER=1`` (as in CI, where
``.ci/compose/setup`` installs and starts it).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import httpx
import pytest

from tests.helpers import eventually

ROOT = Path(__file__).parent.parent
COMPOSE_FILES = ("-f", str(ROOT / "docker-compose.yml"), "-f", str(ROOT / ".ci/compose/ci.yml"))
IMAGE = "phasewatch:ci"
POSTGRES_IMAGE = "phasewatch-ci-postgres:15"
BASE_IMAGE = "phasewatch-ci-base:bookworm"  # .ci/compose/build's default
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


class Images(NamedTuple):
    phasewatch: str
    postgres: str


def build_images() -> Images:
    """The images of this checkout, as ``.ci/compose/build`` makes them, unless images of the
    same digest (``source_digest``) are there already."""
    subprocess.run([str(ROOT / ".ci/compose/base-image"), BASE_IMAGE], check=True, timeout=900)
    digest = source_digest(ROOT, _image_id(BASE_IMAGE))[:16]
    images = Images(f"{IMAGE}-{digest}", f"{POSTGRES_IMAGE}-{digest}")
    if not all(_image_id(image) for image in images):
        env = os.environ | {"PYTHON": sys.executable, "PHASEWATCH_CI_BASE_IMAGE": BASE_IMAGE}
        env |= {"PHASEWATCH_IMAGE": images.phasewatch, "PHASEWATCH_POSTGRES_IMAGE": images.postgres}
        build = [str(ROOT / ".ci/compose/build")]
        subprocess.run(build, env=env, check=True, timeout=BUILD_TIMEOUT_S)
    return images


def source_digest(root: Path, base_image_id: str) -> str:
    """A SHA-256 over everything ``.ci/compose/build`` builds from: the base image and each
    file it sends (git's list of tracked and untracked, not ignored, files: path and content).
    Its wheelhouse is made from these files, so it needs no hash of its own."""
    digest = hashlib.sha256(base_image_id.encode() + b"\0")
    for name in _build_files(root):
        path = root / os.fsdecode(name)
        if path.is_file():  # a tracked file deleted from the work tree is not sent either
            digest.update(name + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _build_files(root: Path) -> list[bytes]:
    command = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    listed = subprocess.run(command, cwd=root, capture_output=True, check=True, timeout=60)
    return sorted(set(listed.stdout.split(b"\0")) - {b""})


def _image_id(image: str) -> str:
    """The image's id, or "" when there is no such image."""
    found = subprocess.run(
        ["/usr/bin/docker", "image", "inspect", "--format", "{{.Id}}", image],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return found.stdout.strip() if found.returncode == 0 else ""


class Stack:
    """One compose project: ``up``, ``compose(...)`` for anything else, ``down`` removes all."""

    def __init__(self, workdir: Path, port: int, images: Images) -> None:
        self.project = f"pwtest{uuid.uuid4().hex[:8]}"
        self.base_url = f"http://127.0.0.1:{port}"
        self.env = os.environ | {
            "PHASEWATCH_IMAGE": images.phasewatch,
            "PHASEWATCH_POSTGRES_IMAGE": images.postgres,
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
