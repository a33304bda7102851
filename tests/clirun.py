"""Run the `phasewatch` command in-process, as a user would from a shell."""

from __future__ import annotations

import pytest

from app.cli import main


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Exit code, standard output and standard error of ``phasewatch ARGV``."""
    try:
        main(argv)
        code = 0
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err
