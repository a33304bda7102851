"""PostgreSQL for process-level tests, and `phasewatch serve` as a real process.

``PgCluster`` is a private, throw-away PostgreSQL cluster: a test may stop and start it,
or freeze it (SIGSTOP: the kernel still accepts and acknowledges, nobody answers), without
disturbing the machine's shared server that every other test uses. PostgreSQL refuses to
run as root, so as root its binaries run as the ``postgres`` OS user.

``Serve`` is one ``phasewatch serve`` process on a loopback port, its log in a file.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

import httpx
import pytest

from tests.helpers import eventually, free_port

PG_BIN_GLOB = "/usr/lib/postgresql/*/bin"
PG_USER = "postgres"
PG_CTL_TIMEOUT_S = 30
# How long a starting serve may take to answer /healthz before we call it stuck: a liveness
# bound, not a speed claim. On a machine whose cores are busy a cold start (imports,
# migrations) ran past the 20 s this once was: the commonest failure of the suite under load.
READY_S = 90.0
SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "50",
}


def unavailable(reason: str) -> NoReturn:
    """Skip, or fail when PHASEWATCH_REQUIRE_POSTGRES=1 (as conftest does for the server)."""
    if os.environ.get("PHASEWATCH_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"{reason}; PHASEWATCH_REQUIRE_POSTGRES=1 forbids skipping", pytrace=False)
    pytest.skip(reason)


def find_pg_bin() -> Path | None:
    """The newest installed PostgreSQL's bin directory that has initdb and pg_ctl."""
    found = [Path(d) for d in glob.glob(PG_BIN_GLOB) if (Path(d) / "initdb").exists()]
    found = [d for d in found if (d / "pg_ctl").exists()]
    return max(found, key=lambda d: int(d.parent.name), default=None)


class PgCluster:
    """A PostgreSQL cluster in a temporary directory, listening on 127.0.0.1 only."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.port = free_port()
        self.directory = Path(tempfile.mkdtemp(prefix="phasewatch-pg-"))
        self.data = self.directory / "data"
        self.logfile = self.directory / "postgres.log"
        self.running = False
        self.frozen: list[int] = []
        if os.geteuid() == 0:
            owner = pwd.getpwnam(PG_USER)
            os.chown(self.directory, owner.pw_uid, owner.pw_gid)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "--no-sync")
        settings = {**SETTINGS, "port": str(self.port)}
        settings["unix_socket_directories"] = f"'{self.directory}'"
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.writelines(f"{name} = {value}\n" for name, value in settings.items())

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        self._pg_ctl("start", "-l", str(self.logfile))
        self.running = True

    def stop(self, mode: str = "fast") -> None:
        """Stop the server; ``fast`` ends every session at once, as a restart does."""
        self._pg_ctl("stop", "-m", mode)
        self.running = False

    def freeze(self) -> None:
        """SIGSTOP the server and every backend, as a paused VM or a stuck disk would.

        The postmaster first, so no backend starts after the list is read; a backend that
        ended since (a client closed its connection) is not there to stop."""
        postmaster = self._postmaster()
        os.kill(postmaster, signal.SIGSTOP)
        self.frozen = [postmaster]
        for pid in self._children(postmaster):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
                self.frozen.append(pid)

    def thaw(self) -> None:
        for pid in self.frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        self.frozen = []

    def _postmaster(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split()[0])

    @staticmethod
    def _children(parent: int) -> list[int]:
        """The processes whose parent is ``parent``, from /proc."""
        children = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                # After the command's closing parenthesis: state, then the parent's pid.
                if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == parent:
                    children.append(int(stat.parent.name))
        return children

    def destroy(self) -> None:
        """Stop whatever still runs (never fails) and remove the directory."""
        self.thaw()  # a frozen server would not hear the stop
        if self.running:
            try:
                self.stop("immediate")
            except subprocess.SubprocessError:
                self._kill_postmaster()
        shutil.rmtree(self.directory, ignore_errors=True)

    def log(self) -> str:
        try:
            return self.logfile.read_text(errors="replace")
        except OSError:
            return ""

    def _pg_ctl(self, *args: str) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-w", "-t", str(PG_CTL_TIMEOUT_S), *args)

    def _run(self, program: str, *args: str) -> None:
        command = [str(self.bin_dir / program), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", PG_USER, "--", *command]
        result = subprocess.run(
            command,
            cwd=self.directory,
            capture_output=True,
            text=True,
            timeout=PG_CTL_TIMEOUT_S + 10,
            check=False,
        )
        if result.returncode != 0:
            raise subprocess.CalledProcessError(
                result.returncode, command, result.stdout, result.stderr + self.log()
            )

    def _kill_postmaster(self) -> None:
        try:
            os.kill(self._postmaster(), signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            pass


class Serve:
    """``phasewatch serve`` in a process of its own; stdout and stderr go to ``serve.log``.

    ``args`` go after the command's own; ``wrap`` before it (a program that ends by
    exec'ing the rest, so the process is serve's). ``PHASEWATCH_SPOOL_DIR`` in ``env``
    overrides the spool in ``workdir``.
    """

    def __init__(
        self,
        workdir: Path,
        config: Path,
        env: dict[str, str],
        args: tuple[str, ...] = (),
        wrap: tuple[str, ...] = (),
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.spool_dir = Path(env.get("PHASEWATCH_SPOOL_DIR", workdir / "spool"))
        self.logpath = workdir / "serve.log"
        self._log = self.logpath.open("w")
        command = [*wrap, sys.executable, "-m", "app", "serve", "--config", str(config)]
        environment = os.environ | {"PHASEWATCH_SPOOL_DIR": str(self.spool_dir)} | env
        self.process = subprocess.Popen(
            [*command, "--port", str(self.port), *args],
            env=environment,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def health(self, timeout_s: float = 2.0) -> dict[str, object] | None:
        try:
            response = httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=timeout_s)
        except httpx.HTTPError:
            return None
        return dict(response.json())

    def wait_ready(self, within_s: float = READY_S) -> None:
        alive = "serve answers /healthz"
        try:
            eventually(lambda: self.health() is not None or not self.alive(), within_s, alive)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; its output:\n{self.output()}") from None
        assert self.alive(), self.output()

    def alive(self) -> bool:
        return self.process.poll() is None

    def output(self) -> str:
        return self.logpath.read_text(errors="replace")

    def spooled_ids(self) -> list[str]:
        try:
            lines = (self.spool_dir / "runs.jsonl").read_text().splitlines()
        except FileNotFoundError:
            return []
        return [json.loads(line)["id"] for line in lines if line.strip()]

    def terminate(self, within_s: float = 15.0) -> float:
        """SIGTERM; returns the seconds until the process exited."""
        began = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=within_s)
        return time.monotonic() - began

    def kill(self) -> None:
        if self.alive():
            self.process.kill()
        self.process.wait(timeout=10)
        self._log.close()


@contextmanager
def private_cluster() -> Iterator[PgCluster]:
    """A started cluster, always stopped and removed afterwards; skips without PostgreSQL."""
    bin_dir = find_pg_bin()
    if bin_dir is None:
        unavailable(f"no PostgreSQL binaries (initdb, pg_ctl) in {PG_BIN_GLOB}")
    if os.geteuid() == 0 and not _user_exists(PG_USER):
        unavailable(f"running as root and there is no {PG_USER!r} OS user to run PostgreSQL")
    cluster = PgCluster(bin_dir)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.destroy()


@contextmanager
def serving(workdir: Path) -> Iterator[Callable[..., Serve]]:
    """A factory of ``Serve`` processes; every one is killed at the end, even on failure."""
    started: list[Serve] = []

    def start(
        name: str,
        config: Path,
        *,
        args: tuple[str, ...] = (),
        wrap: tuple[str, ...] = (),
        **env: str,
    ) -> Serve:
        started.append(Serve(workdir / name, config, env, args, wrap))
        return started[-1]

    try:
        yield start
    finally:
        for served in started:
            served.kill()


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True
