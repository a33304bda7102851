"""``${NAME}``: one expansion (app.envvars) and one rule wherever a value may hold one.

The rule: a variable that is not set is an error that names the variable and where it was
used (file, line, field; or the option), never a value. Only commands that never send
(``require_env=False``: backtest, export, check-config of a file for another machine)
keep the reference as written.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from app.cli.probe import parse_header
from app.config import ConfigError, load_targets
from app.envvars import UnsetVariable, expand

ENV = {"TOKEN": "s3cret", "EMPTY": "", "HOST": "hooks.example"}


@pytest.mark.parametrize(
    ("value", "keep_unset", "expected"),
    [
        ("Bearer ${TOKEN}", False, "Bearer s3cret"),
        ("${HOST}/${TOKEN}", False, "hooks.example/s3cret"),
        ("a${EMPTY}b", False, "ab"),  # set but empty is set
        ("$TOKEN and ${ TOKEN } and ${1X}", False, "$TOKEN and ${ TOKEN } and ${1X}"),  # not refs
        ("Bearer ${NOPE}", True, "Bearer ${NOPE}"),
        ("${TOKEN}:${NOPE}", True, "s3cret:${NOPE}"),
    ],
)
def test_expand_replaces_each_reference(value: str, keep_unset: bool, expected: str) -> None:
    assert expand(value, ENV, keep_unset=keep_unset) == expected


@pytest.mark.parametrize("value", ["${NOPE}", "Bearer ${TOKEN}${NOPE}", "${NOPE}${ALSO_NOT}"])
def test_an_unset_variable_is_an_error_naming_it(value: str) -> None:
    with pytest.raises(UnsetVariable) as caught:
        expand(value, ENV)
    assert caught.value.name == "NOPE"
    assert str(caught.value) == "environment variable NOPE is not set"


TARGET = "targets:\n  - name: a\n    url: http://x/\n"
WEBHOOK = "notifiers:\n  ops:\n    type: webhook\n"
ALERTMANAGER = "notifiers:\n  am:\n    type: alertmanager\n    url: http://am:9093\n"

# (file, where the unset variable was used, the reference kept by require_env=False)
PLACES = [
    (
        TARGET + "    headers: {Authorization: 'Bearer ${NOPE}'}\n",
        "phasewatch.yaml:4: targets[a].headers.Authorization",
        lambda f: f.targets[0].headers["Authorization"],
    ),
    (
        WEBHOOK + "    url: ${NOPE}\n" + TARGET,
        "phasewatch.yaml:4: notifiers.ops.url",
        lambda f: f.notifiers["ops"].url.get_secret_value(),
    ),
    (
        WEBHOOK + "    url: http://x/\n    headers: {X-Key: '${NOPE}'}\n" + TARGET,
        "phasewatch.yaml:5: notifiers.ops.headers.X-Key",
        lambda f: f.notifiers["ops"].headers["X-Key"].get_secret_value(),
    ),
    (
        ALERTMANAGER + "    basic_auth: {username: am, password: '${NOPE}'}\n" + TARGET,
        "phasewatch.yaml:5: notifiers.am.basic_auth.password",
        lambda f: f.notifiers["am"].basic_auth.password.get_secret_value(),
    ),
]


@pytest.mark.parametrize(("text", "where", "_kept"), PLACES)
def test_an_unset_variable_in_the_file_names_it_and_where(
    tmp_path: Path, text: str, where: str, _kept: object
) -> None:
    path = tmp_path / "phasewatch.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_targets(path, ENV)
    problem = f"{tmp_path}/{where}: environment variable NOPE is not set"
    assert caught.value.problems == [problem]


@pytest.mark.parametrize(("text", "_where", "kept"), PLACES)
def test_a_command_that_never_sends_keeps_the_reference(
    tmp_path: Path, text: str, _where: str, kept: object
) -> None:
    path = tmp_path / "phasewatch.yaml"
    path.write_text(text)
    found = load_targets(path, ENV, require_env=False)
    assert callable(kept) and "${NOPE}" in kept(found)


def test_a_set_variable_in_the_file_is_expanded(tmp_path: Path) -> None:
    path = tmp_path / "phasewatch.yaml"
    path.write_text(TARGET + "    headers: {Authorization: 'Bearer ${TOKEN}'}\n")
    assert load_targets(path, ENV).targets[0].headers == {"Authorization": "Bearer s3cret"}


def test_an_unset_variable_in_probe_header_names_it_and_the_option(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PHASEWATCH_TEST_NOPE", raising=False)
    with pytest.raises(typer.BadParameter) as caught:
        parse_header("Authorization: Bearer ${PHASEWATCH_TEST_NOPE}")
    assert caught.value.param_hint == "--header"
    assert str(caught.value) == "environment variable PHASEWATCH_TEST_NOPE is not set"
