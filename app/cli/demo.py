"""`phasewatch demo`: the story of ``app.demo.story`` in compressed time, on a live dashboard."""

from __future__ import annotations

import logging
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer

from app.cli.common import fail, own_command

if TYPE_CHECKING:
    from collections.abc import Callable

    import uvicorn

    from app.alerts.identity import Transition
    from app.config import TargetsFile
    from app.demo.replay import Replay
    from app.runtime.metrics import RunMetrics
    from app.store.records import RunRecord

HOST = "127.0.0.1"
DEFAULT_SPEED = 1200.0  # simulated seconds per real second: an hour every 3 s
STORY = (
    "translate-prod (275 ms away) turns reasoning off at hour 4; busy hours begin at 5.5.",
    "translate-edge (25 ms away, slower, cold starts) is tried from hour 4.5 to 7 under a"
    " 1.5 s deadline.",
)


def demo(
    speed: Annotated[
        float,
        typer.Option(
            min=0,
            help="Simulated seconds per real second, at most (1200: an hour every 3 s);"
            " 0: as fast as the CPU allows.",
        ),
    ] = DEFAULT_SPEED,
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="Dashboard port on 127.0.0.1; 0 picks one.")
    ] = 8080,
) -> None:
    """Replay 8.5 simulated hours in compressed time: simulated endpoints, real probes,
    storage, detection and alerts, and the dashboard. Ctrl-C stops."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # The demo prints each alert itself, with the story's hour: serve's log line would repeat it.
    logging.getLogger("app.alerts.engine").setLevel(logging.ERROR)
    listener = _listen(port)
    workdir = Path(tempfile.mkdtemp(prefix="phasewatch-demo-"))
    signal.signal(signal.SIGTERM, _terminated)
    try:
        _run(listener, workdir, speed)
    except KeyboardInterrupt:
        sys.stdout.write("stopped\n")
        raise typer.Exit(130) from None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _run(listener: socket.socket, workdir: Path, speed: float) -> None:
    from app import clock
    from app.demo.replay import Replay
    from app.store.migrate import upgrade

    database_url = f"sqlite:///{workdir / 'demo.db'}"
    upgrade(database_url)
    started = time.monotonic()
    replay = Replay(database_url, workdir, speed or None, _printer(started))
    try:
        targets = replay.start()
        config = _write_targets_file(workdir, replay)
        server, metrics = _server(listener, workdir, database_url, targets)
        url = f"http://{HOST}:{listener.getsockname()[1]}/"
        _say(f"phasewatch demo: dashboard at {url}  (Ctrl-C stops)")
        for line in STORY:
            _say(f"  {line}")
        _say(f"  Its targets file, with the story's detector settings: {config}")
        # The dashboard's /metrics count the story's runs, as serve's count its own.
        _watch(server, replay, started, _replay_hint(database_url, config), metrics.observe_run)
        # The dashboard on the story's clock: its "last hour" is the story's, not the real
        # hour that the story's runs reach only as it ends.
        with clock.use(time.perf_counter_ns, replay.dashboard_now):
            server.run(sockets=[listener])
    finally:
        replay.stop()
    if replay.error is not None:
        fail(f"the demo stopped: {replay.error}")
    # Only a signal stops the server otherwise. uvicorn raises it again once it has shut down,
    # but whether that reaches here as KeyboardInterrupt depends on where asyncio's runner
    # was when it landed: say it was a stop either way.
    raise KeyboardInterrupt


def _write_targets_file(workdir: Path, replay: Replay) -> Path:
    """The demo's targets file beside its database: the detector settings its compressed
    story needs (a reference after hours, not a day) are what `backtest` of an export of
    it needs too, and are no secret."""
    import yaml

    from app.demo.replay import demo_targets_file

    path = workdir / "phasewatch.yaml"
    text = yaml.safe_dump(demo_targets_file(replay.urls), sort_keys=False, allow_unicode=True)
    path.write_text(text)
    return path


def _server(
    listener: socket.socket, workdir: Path, database_url: str, targets: TargetsFile
) -> tuple[uvicorn.Server, RunMetrics]:
    import uvicorn

    from app.config import Settings
    from app.main import create_app
    from app.web.deps import metrics_of

    settings = Settings(
        config=workdir / "phasewatch.yaml",
        database_url=database_url,
        vantage="demo",
        spool_dir=workdir / "web-spool",
        host=HOST,
        port=listener.getsockname()[1],
    )
    app = create_app(settings, targets, probing=False)
    config = uvicorn.Config(app, log_config=None, log_level="warning")
    return uvicorn.Server(config), metrics_of(app)


def _replay_hint(database_url: str, config: Path) -> str:
    command = own_command()
    return (
        "  To replay its alerts, while it is up (Ctrl-C removes its files):\n"
        f"    {command} export --database-url {database_url} > demo.csv\n"
        f"    cp {config} demo.yaml && {command} backtest demo.csv --config demo.yaml"
    )


def _watch(
    server: uvicorn.Server,
    replay: Replay,
    started: float,
    hint: str,
    observe_run: Callable[[RunRecord], object],
) -> None:
    """Start the story once the dashboard answers; say when it is over."""

    def watch() -> None:
        while not server.started and not server.should_exit:
            time.sleep(0.02)
        replay.go(observe_run)
        replay.finished.wait()
        if replay.error is not None:
            server.should_exit = True  # the command fails with the replay's error
        elif not server.should_exit:
            elapsed = time.monotonic() - started
            _say(f"[+{elapsed:5.1f}s] the story is over; the dashboard stays up until Ctrl-C")
            _say(hint)
            _last_scene(replay)

    threading.Thread(target=watch, name="demo-watch", daemon=True).start()


def _last_scene(replay: Replay) -> None:
    from app.demo import story
    from app.demo.finale import finale

    since = replay.at_hour(story.SWITCH_H)
    for line in finale(replay.database_url, since, replay.now()):
        _say(line)


def _printer(started: float) -> Callable[[Transition, float], None]:
    def show(transition: Transition, story_hour: float) -> None:
        identity = transition.identity
        where = identity.vantage or "all vantages"
        elapsed = time.monotonic() - started
        _say(
            f"[+{elapsed:5.1f}s | hour {story_hour:.1f}, {transition.at:%H:%M}Z]"
            f" {transition.after.value.upper()}"
            f" {identity.kind} {identity.target} ({where}): {transition.summary}"
        )

    return show


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _listen(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        fail(f"cannot listen on {HOST}:{port}: {exc.strerror}; pick another with --port")
    sock.listen(128)
    return sock


def _terminated(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # stop as Ctrl-C does: the temporary directory is removed
