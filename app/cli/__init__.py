"""The ``phasewatch`` command: one Typer app, its commands in the modules beside this one.

A command's module is imported when that command runs, not at every start (nor to list the
commands): ``phasewatch whatif`` has no use for the probe's HTTP stack, nor ``version`` for
SQLAlchemy, and their start-up is part of every answer a person waits for.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, NamedTuple

import typer
from typer.core import TyperGroup
from typer.exceptions import TyperException
from typer.main import get_command_from_info
from typer.models import CommandInfo

from app import __version__
from app.cli.common import one_line

if TYPE_CHECKING:
    from typer._click.core import Command, Context  # typer's own click, which it vendors
    from typer._click.formatting import HelpFormatter


class Lazy(NamedTuple):
    """A command built on first use: where its function is, and its line in the group's help
    (so listing the commands imports none of them)."""

    where: str  # "module:function"
    summary: str


# In the order help lists them.
COMMANDS = {
    "probe": Lazy("app.cli.probe:probe", "Probe an endpoint N times and show where the time goes."),
    "serve": Lazy(
        "app.cli.service:serve", "Probe, store and alert on every target; serve the dashboard."
    ),
    "agent": Lazy(
        "app.cli.agent:agent", "Probe this vantage's targets and push each run to serve."
    ),
    "demo": Lazy("app.cli.demo:demo", "Replay a story on simulated endpoints in compressed time."),
    "check-config": Lazy(
        "app.cli.service:check_config", "Validate a targets file; exit 1 if wrong."
    ),
    "export": Lazy("app.cli.data:export_csv", "Write stored samples as CSV, oldest first."),
    "import": Lazy("app.cli.data:import_csv", "Store the runs of a CSV of samples, all or none."),
    "backtest": Lazy("app.cli.backtest:backtest", "Replay samples through the detectors."),
    "whatif": Lazy("app.cli.whatif:whatif", "Predict end-to-end and misses after a change."),
}
DB_COMMANDS = {
    "upgrade": Lazy("app.cli.service:db_upgrade", "Migrate the database to this schema."),
    "current": Lazy("app.cli.service:db_current", "Show the schema revision; exit 1 if behind."),
}


class LazyGroup(TyperGroup):
    """A group whose ``lazy`` commands are built from their function on first use."""

    lazy: dict[str, Lazy] = {}

    def list_commands(self, ctx: Context) -> list[str]:
        return [*self.lazy, *(name for name in super().list_commands(ctx) if name not in self.lazy)]

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            self.add_command(_command(cmd_name, self.lazy[cmd_name]), cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: Context, formatter: HelpFormatter) -> None:
        """Click's listing, with the lazy commands' summaries: none of them is built."""
        rows = [(name, self._summary(ctx, name)) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl([(name, summary) for name, summary in rows if summary is not None])

    def _summary(self, ctx: Context, name: str) -> str | None:
        if name in self.lazy:
            return self.lazy[name].summary
        command = super().get_command(ctx, name)
        return None if command is None or command.hidden else command.get_short_help_str()


class MainGroup(LazyGroup):
    lazy = COMMANDS


class DbGroup(LazyGroup):
    lazy = DB_COMMANDS


def _command(name: str, lazy: Lazy) -> Command:
    module, function = lazy.where.split(":")
    callback = getattr(importlib.import_module(module), function)
    info = CommandInfo(name=name, callback=callback, short_help=lazy.summary)
    return get_command_from_info(info, pretty_exceptions_short=True, rich_markup_mode=None)


cli = typer.Typer(
    name="phasewatch",
    cls=MainGroup,
    help="Tells you when the bottleneck of a latency-critical endpoint has moved.",
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    add_completion=False,
)
db = typer.Typer(cls=DbGroup, help="Database schema.", no_args_is_help=True, rich_markup_mode=None)
cli.add_typer(db, name="db")


@cli.command()
def version() -> None:
    """Print the version."""
    sys.stdout.write(f"phasewatch {__version__}\n")


def _version_option(value: bool) -> None:
    if value:
        version()
        raise typer.Exit()


@cli.callback()
def _options(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_version_option, help="Print the version."
        ),
    ] = False,
) -> None:
    """Tells you when the bottleneck of a latency-critical endpoint has moved."""


def every_command() -> dict[str, Command]:
    """Every command by its full name (``"db upgrade"``), modules imported, in help order."""
    return dict(_walk(typer.main.get_command(cli), ()))


def _walk(command: Command, path: tuple[str, ...]) -> Iterator[tuple[str, Command]]:
    if not isinstance(command, TyperGroup):
        yield " ".join(path), command
        return
    ctx = typer.Context(command)
    for name in command.list_commands(ctx):
        sub = command.get_command(ctx, name)
        if sub is not None:
            yield from _walk(sub, (*path, name))


def main(argv: list[str] | None = None) -> None:
    """Entry point: usage errors are one line on stderr and exit code 2."""
    args = sys.argv[1:] if argv is None else argv
    if args in ([], ["db"]):
        # A group alone asks for its help: given as written, not folded into an error line.
        args = [*args, "--help"]
    try:
        code = cli(args=args, standalone_mode=False, prog_name="phasewatch")
    except TyperException as exc:
        sys.stderr.write(f"phasewatch: error: {one_line(exc.format_message())}\n")
        sys.exit(exc.exit_code)
    except typer.Abort:
        sys.stderr.write("phasewatch: aborted\n")
        sys.exit(130)
    except BrokenPipeError:
        # `phasewatch export | head`: the reader has all it wanted.
        sys.stderr.close()
        sys.exit(0)
    if isinstance(code, int) and code:
        sys.exit(code)
