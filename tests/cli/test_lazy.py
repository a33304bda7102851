"""A command imports what it uses: its module is loaded when it runs, not at every start."""

from __future__ import annotations

import subprocess
import sys

import pytest

from app import __version__
from app.cli import COMMANDS, DB_COMMANDS, Lazy, every_command
from tests.clirun import run_cli

LAZY = [*COMMANDS.values(), *DB_COMMANDS.values()]

# What a command's run leaves in sys.modules, printed by a fresh interpreter.
SCRIPT = """
import sys
from app.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(" ".join(sorted(sys.modules)), file=sys.stderr)
"""


def modules_after(*argv: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, *argv], capture_output=True, text=True, check=True
    )
    return set(done.stderr.split())


@pytest.mark.parametrize(
    ("argv", "absent"),
    [
        (["version"], {"sqlalchemy", "httpx", "numpy", "app.cli.probe", "app.cli.whatif"}),
        (["whatif", "--help"], {"httpx", "sqlalchemy", "app.cli.probe", "app.cli.service"}),
        (["db", "current", "--help"], {"httpx", "app.cli.probe", "app.cli.whatif"}),
        (
            ["--help"],
            {"sqlalchemy", "httpx", "numpy", *(lazy.where.split(":")[0] for lazy in LAZY)},
        ),
        (["db", "--help"], {"sqlalchemy", "app.cli.service"}),
    ],
)
def test_a_command_does_not_import_the_others(argv: list[str], absent: set[str]) -> None:
    assert modules_after(*argv) & absent == set()


def test_the_command_that_runs_is_imported() -> None:
    assert "app.cli.whatif" in modules_after("whatif", "--help")


@pytest.mark.parametrize(("argv", "table"), [([], COMMANDS), (["db"], DB_COMMANDS)])
def test_the_listing_shows_every_lazy_command_with_its_summary(
    argv: list[str], table: dict[str, Lazy]
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "app", *argv, "--help"], capture_output=True, text=True, check=True
    )
    listed = dict(line.split(None, 1) for line in done.stdout.split("Commands:\n")[1].splitlines())
    assert {name: listed[name] for name in table} == {
        name: lazy.summary for name, lazy in table.items()
    }


def test_a_built_command_shows_the_summary_it_was_listed_with() -> None:
    built = every_command()
    for prefix, table in [("", COMMANDS), ("db ", DB_COMMANDS)]:
        for name, lazy in table.items():
            assert built[prefix + name].get_short_help_str(limit=200) == lazy.summary


@pytest.mark.parametrize(("argv", "usage"), [([], "phasewatch"), (["db"], "phasewatch db")])
def test_a_group_alone_prints_its_help_as_written_and_exits_0(
    argv: list[str], usage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(argv, capsys)
    assert (code, err) == (0, "")
    assert out.startswith(f"Usage: {usage} [OPTIONS] COMMAND [ARGS]...\n\n")
    assert "\nCommands:\n" in out


@pytest.mark.parametrize("argv", [["--version"], ["version"]])
def test_the_version_is_an_option_and_a_command(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(argv, capsys) == (0, f"phasewatch {__version__}\n", "")
