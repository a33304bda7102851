"""A command imports what it uses: its module is loaded when it runs, not at every start."""

from __future__ import annotations

import subprocess
import sys

import pytest

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
    ],
)
def test_a_command_does_not_import_the_others(argv: list[str], absent: set[str]) -> None:
    assert modules_after(*argv) & absent == set()


def test_the_command_that_runs_is_imported() -> None:
    assert "app.cli.whatif" in modules_after("whatif", "--help")
