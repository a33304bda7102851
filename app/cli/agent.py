"""`phasewatch agent`: probe at one vantage what a server assigns it, push every run there."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from app.cli.common import exit_now, fail

if TYPE_CHECKING:
    from app.agents.remote.runner import Agent

EXECUTOR_THREADS = 8  # the agent's blocking calls: fetches, reports, spool counts


def agent(
    server: Annotated[
        str, typer.Option(envvar="PHASEWATCH_SERVER", help="The server's URL; $PHASEWATCH_SERVER.")
    ],
    vantage: Annotated[
        str,
        typer.Option(
            envvar="PHASEWATCH_VANTAGE", help="This agent's vantage; $PHASEWATCH_VANTAGE."
        ),
    ],
    token: Annotated[
        str | None,
        typer.Option(
            envvar="PHASEWATCH_AGENT_TOKEN",
            help="The vantage's token; better $PHASEWATCH_AGENT_TOKEN (a command line is seen"
            " by every user of the machine).",
        ),
    ] = None,
    spool_dir: Annotated[
        Path,
        typer.Option(envvar="PHASEWATCH_SPOOL_DIR", help="Runs wait here for the server."),
    ] = Path("./phasewatch-agent-spool"),
    refresh: Annotated[
        float | None,
        typer.Option(help="Seconds between assignment fetches; default the server's word."),
    ] = None,
    log_level: Annotated[str, typer.Option(help="debug, info, warning or error.")] = "info",
) -> None:
    """Fetch this vantage's targets from the server, probe them as serve does, and push
    each run; while the server is away, runs wait in the spool. SIGTERM stops it within
    4 s, whatever the server does (exit 0): what it could not push waits in the spool."""
    from app.agents.remote.client import NotAdmitted, ServerClient
    from app.agents.remote.runner import Agent
    from app.cli.service import LOG_FORMAT, quiet_chatty_loggers

    if not token or not token.strip():
        fail("no token: set PHASEWATCH_AGENT_TOKEN (or --token) to this vantage's token")
    if not server.startswith(("http://", "https://")):
        fail(f"--server must be an http:// or https:// URL, not {server!r}")
    logging.basicConfig(level=log_level.upper(), format=LOG_FORMAT)
    quiet_chatty_loggers()
    client = ServerClient(server, token.strip(), vantage)
    try:
        asyncio.run(_run(Agent(client, vantage, spool_dir, refresh_s=refresh)))
    except NotAdmitted as exc:
        fail(
            f"{server} refuses this token for vantage {vantage!r} ({exc}): check"
            " PHASEWATCH_AGENT_TOKEN and --vantage against the server's vantages:"
        )
    # Stopped: a fetch, report or push left behind on its thread must not hold the exit.
    exit_now(0)


async def _run(agent: Agent) -> None:
    from app.runs.threads import NoWaitThreadPool

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # asyncio.run would otherwise wait at its end for every to_thread call still in flight.
    loop.set_default_executor(NoWaitThreadPool(EXECUTOR_THREADS))
    for signum in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, stop.set)
    logging.getLogger(__name__).info("agent %s started", agent.vantage)
    await agent.run(stop)
