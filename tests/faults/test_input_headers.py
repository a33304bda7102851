"""Header names are RFC 9110 tokens and values carry no CR or LF: in a target, in a
notifier and on `probe --header`, refused before anything is sent, naming where."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.probe.headername import is_header_name
from tests.faults.limited import run_limited

TCHARS = "!#$%&'*+-.^_`|~"


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("Authorization", True),
        ("x-api-key", True),
        (f"X{TCHARS}09az", True),
        ("X Key", False),
        ("X-Key ", False),
        ("X:Key", False),
        ("X\tKey", False),
        ("", False),
        ("Ключ", False),
        ('X"Key', False),
        ("X(Key)", False),
        ("X,Key", False),
    ],
)
def test_a_header_name_is_an_rfc9110_token(name: str, ok: bool) -> None:
    assert is_header_name(name) is ok


def check_config(tmp_path: Path, text: str) -> tuple[int, list[str]]:
    path = tmp_path / "phasewatch.yaml"
    path.write_text(text)
    done = run_limited(["check-config", str(path)], tmp_path, env={"KEY": "k3y"})
    return done.code, [line.removeprefix(f"{tmp_path}/") for line in done.err.splitlines()]


TARGET_A = "targets:\n  - name: a\n    url: http://x/\n"
TARGET = TARGET_A + "    headers:\n"


@pytest.mark.process
@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (
            "      X Key: v\n",
            "phasewatch.yaml:6: targets[a].headers.X Key: 'X Key' is not a header name: RFC "
            "9110 allows letters, digits and !#$%&'*+-.^_`|~, no spaces, colons or other "
            "characters",
        ),
        ('      "X:Key": v\n', "phasewatch.yaml:6: targets[a].headers.X:Key: 'X:Key' is not a"),
        (
            '      X-Key: "${KEY}\\r\\nInjected: yes"\n',
            "phasewatch.yaml:4: targets[a].headers: X-Key: the value has a control character",
        ),
    ],
    ids=["space", "colon", "crlf-value"],
)
def test_check_config_refuses_a_header_http_cannot_send(
    tmp_path: Path, header: str, expected: str
) -> None:
    code, lines = check_config(tmp_path, TARGET + "      Good: v\n" + header)
    assert code == 1
    assert lines[0].startswith(expected), lines
    assert "k3y" not in "".join(lines)  # a value is never quoted: it may be a secret


@pytest.mark.process
def test_check_config_refuses_a_notifier_header_name_with_a_space(tmp_path: Path) -> None:
    notifier = "notifiers:\n  hook:\n    type: webhook\n    url: http://x/\n"
    code, lines = check_config(tmp_path, notifier + "    headers: {X Token: v}\n" + TARGET_A)
    assert code == 1
    assert lines[0].startswith(
        "phasewatch.yaml:5: notifiers.hook.headers.X Token: 'X Token' is not a header name"
    ), lines


@pytest.mark.process
def test_probe_refuses_a_header_name_with_a_space(tmp_path: Path) -> None:
    done = run_limited(["probe", "http://127.0.0.1:9/", "--header", "X Key: v"], tmp_path)
    assert done.code == 2
    assert done.err.startswith("phasewatch: error: Invalid value for --header: 'X Key' is not")


@pytest.mark.process
def test_a_good_header_still_passes(tmp_path: Path) -> None:
    code, lines = check_config(tmp_path, TARGET + f"      X{TCHARS}: 'Bearer ${{KEY}}'\n")
    assert code == 0, lines
