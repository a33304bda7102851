"""The ``phasewatch`` command: one Typer app, its commands in the modules beside this one."""

from __future__ import annotations

import sys

import typer
from typer.exceptions import TyperException

from app import __version__
from app.cli import agent, backtest, data, demo, probe, service, whatif
from app.cli.common import one_line

cli = typer.Typer(
    name="phasewatch",
    help="Tells you when the bottleneck of a latency-critical endpoint has moved.",
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    add_completion=False,
)
db = typer.Typer(help="Database schema.", no_args_is_help=True, rich_markup_mode=None)

cli.command()(probe.probe)
cli.command()(service.serve)
cli.command()(agent.agent)
cli.command()(demo.demo)
cli.command("check-config")(service.check_config)
cli.command("export")(data.export_csv)
cli.command("import")(data.import_csv)
cli.command("backtest")(backtest.backtest)
cli.command("whatif")(whatif.whatif)
cli.add_typer(db, name="db")
db.command("upgrade")(service.db_upgrade)
db.command("current")(service.db_current)


@cli.command()
def version() -> None:
    """Print the version."""
    sys.stdout.write(f"phasewatch {__version__}\n")


def main(argv: list[str] | None = None) -> None:
    """Entry point: usage errors are one line on stderr and exit code 2."""
    try:
        code = cli(args=argv, standalone_mode=False)
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
