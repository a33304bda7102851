"""The Dockerfile and docker-compose.yml, checked against the real CLI and settings.

Docker cannot run here, so the files are parsed and every wiring a deployment depends on
is checked: the services, PostgreSQL 16 and its named volume, both healthchecks, the start
order, the command (parsed by phasewatch's own parser), the environment (real settings,
the token required, provider keys passed through), the read-only targets file, the spool
volume, and the image (slim, not root, healthcheck on the served port). Each check returns
its problems, so the tests can also show it failing on an edited copy.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import typer
import yaml
from sqlalchemy.engine import make_url
from typer.exceptions import TyperException

from app.cli import cli
from app.config import Settings
from app.web.health import router as health_router
from tests.helpers import eventually
from tests.test_serve import Served

ROOT = Path(__file__).parent.parent
COMPOSE_TEXT = (ROOT / "docker-compose.yml").read_text()
DOCKERFILE_TEXT = (ROOT / "Dockerfile").read_text()
EXAMPLE_TARGETS = (ROOT / "docs" / "phasewatch.example.yaml").read_text()
SETTINGS_VARIABLES = {f"PHASEWATCH_{name.upper()}" for name in Settings.model_fields}
HEALTH_PATHS = {getattr(route, "path", None) for route in health_router.routes}
# What an operator exports before `docker compose up` (see the compose file's header).
OPERATOR_ENV = {"PHASEWATCH_API_TOKEN": "t0ken", "POSTGRES_PASSWORD": "s3cret"}
Problems = list[str]


# --- Compose: variable interpolation as `docker compose` does it -----------------------------

_VARIABLE = re.compile(
    r"\$(?:(?P<escaped>\$)|\{(?P<name>[A-Za-z_]\w*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}"
    r"|(?P<bare>[A-Za-z_]\w*))"
)


class MissingVariable(Exception):
    """A ``${NAME:?message}`` whose variable is not set: compose refuses to start."""

    def __init__(self, name: str, message: str) -> None:
        self.name = name
        super().__init__(f"{name}: {message}")


def interpolate(value: Any, env: Mapping[str, str]) -> Any:
    """The compose file as `docker compose config` would see it with this environment."""
    if isinstance(value, dict):
        return {key: interpolate(item, env) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate(item, env) for item in value]
    if isinstance(value, str):
        return _VARIABLE.sub(lambda match: _substitute(match, env), value)
    return value


def _substitute(match: re.Match[str], env: Mapping[str, str]) -> str:
    if match["escaped"]:
        return "$"
    name = match["name"] or match["bare"]
    op, arg = match["op"] or "", match["arg"] or ""
    unset = name not in env or (op.startswith(":") and env[name] == "")
    if unset and op.endswith("?"):
        raise MissingVariable(name, arg or "required")
    if unset and op.endswith("-"):
        return arg
    return env.get(name, "")


# --- Compose: reading services -----------------------------------------------------------------


def load_compose(text: str = COMPOSE_TEXT, env: Mapping[str, str] = OPERATOR_ENV) -> Any:
    return interpolate(yaml.safe_load(text), env)


def environment(service: Mapping[str, Any]) -> dict[str, str | None]:
    """A service's environment as a mapping; None means "passed from the caller's shell"."""
    given = service.get("environment") or {}
    if isinstance(given, dict):
        return {key: None if value is None else str(value) for key, value in given.items()}
    pairs = [entry.partition("=") for entry in given]
    return {key: value if sep else None for key, sep, value in pairs}


@dataclass(frozen=True)
class Mount:
    source: str
    target: str
    read_only: bool


def mounts(service: Mapping[str, Any]) -> list[Mount]:
    found = []
    for entry in service.get("volumes") or []:
        if isinstance(entry, dict):
            found.append(Mount(entry["source"], entry["target"], bool(entry.get("read_only"))))
        else:
            source, target, *mode = entry.split(":")
            found.append(Mount(source, target, "ro" in ",".join(mode).split(",")))
    return found


def named_volume_mounts(compose: Mapping[str, Any], service: Mapping[str, Any]) -> list[Mount]:
    declared = compose.get("volumes") or {}
    return [mount for mount in mounts(service) if mount.source in declared]


def command_list(command: str | list[str] | None) -> list[str]:
    return shlex.split(command) if isinstance(command, str) else list(command or [])


# --- Dockerfile: a small parser ----------------------------------------------------------------


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def last(self, instruction: str) -> str | None:
        found = [args for name, args in self.instructions if name == instruction]
        return found[-1] if found else None

    def all(self, instruction: str) -> list[str]:
        return [args for name, args in self.instructions if name == instruction]

    def env(self) -> dict[str, str]:
        variables: dict[str, str] = {}
        for args in self.all("ENV"):
            words = shlex.split(args)
            if "=" not in words[0]:  # the legacy `ENV NAME value` form
                variables[words[0]] = " ".join(words[1:])
                continue
            variables |= dict(word.split("=", 1) for word in words)
        return variables


def logical_lines(text: str) -> list[str]:
    """Instructions with their continuation lines joined; comments dropped, as Docker does."""
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        lines.append(pending + stripped)
        pending = ""
    return lines + ([pending] if pending.strip() else [])


def parse_dockerfile(text: str = DOCKERFILE_TEXT) -> list[Stage]:
    stages: list[Stage] = []
    for line in logical_lines(text):
        instruction, _, args = line.partition(" ")
        instruction, args = instruction.upper(), args.strip()
        if instruction == "FROM":
            words = [word for word in args.split() if not word.startswith("--")]
            name = words[2] if len(words) > 2 and words[1].upper() == "AS" else None
            stages.append(Stage(words[0], name))
        elif stages:
            stages[-1].instructions.append((instruction, args))
    return stages


def exec_form(args: str) -> list[str]:
    """``["a", "b"]`` as a list; the shell form as the shell would run it."""
    return json.loads(args) if args.startswith("[") else ["/bin/sh", "-c", args]


def healthcheck_command(args: str) -> list[str]:
    match = re.search(r"\bCMD\s+(.*)$", args, re.DOTALL)
    return exec_form(match.group(1).strip()) if match else []


# --- The CLI: parse a command line without running it ------------------------------------------


def parse_command(argv: list[str]) -> dict[str, Any]:
    """The options `phasewatch ARGV` runs with, from the real parser; raises on a bad line."""
    group = typer.main.get_command(cli)
    parent = typer.Context(group, info_name="phasewatch")
    if not argv or (command := group.get_command(parent, argv[0])) is None:
        raise typer.BadParameter(f"no such command: {argv[:1]}", param_hint="COMMAND")
    return dict(command.make_context(argv[0], argv[1:], parent=parent).params)


def command_problems(argv: list[str]) -> Problems:
    if argv[:2] != ["phasewatch", "serve"]:
        return [f"the container runs {argv[:2]}, not phasewatch serve"]
    try:
        options = parse_command(argv[1:])
    except TyperException as exc:
        return [f"phasewatch does not accept {argv[1:]}: {exc.format_message()}"]
    problems = []
    if options["host"] in (None, "127.0.0.1", "localhost"):
        problems.append("serve binds loopback: unreachable from outside the container")
    if not options["migrate"]:
        problems.append("serve does not migrate on start")
    if options["config"] is None:
        problems.append("serve is given no --config")
    return problems


# --- The checks --------------------------------------------------------------------------------


def healthcheck_url_problems(argv: list[str], port: int) -> Problems:
    text = " ".join(argv)
    match = re.search(r"http://(?:127\.0\.0\.1|localhost):(\d+)(/[\w/-]*)", text)
    if match is None:
        return [f"healthcheck {argv} calls no local URL"]
    problems = []
    if int(match.group(1)) != port:
        problems.append(f"healthcheck calls port {match.group(1)}, serve listens on {port}")
    if match.group(2) not in HEALTH_PATHS:
        problems.append(f"healthcheck calls {match.group(2)}, which phasewatch does not serve")
    return problems


def service_problems(compose: Mapping[str, Any]) -> Problems:
    services = compose.get("services") or {}
    problems = [f"no {name} service" for name in ("phasewatch", "postgres") if name not in services]
    if problems:
        return problems
    postgres, phasewatch = services["postgres"], services["phasewatch"]
    image = postgres.get("image", "")
    tag = image.partition(":")[2]
    if not image.startswith("postgres:") or tag.split(".")[0].split("-")[0] != "16":
        problems.append(f"postgres image is {image!r}, not PostgreSQL 16")
    if not any(
        m.target == "/var/lib/postgresql/data" for m in named_volume_mounts(compose, postgres)
    ):
        problems.append("postgres data is not in a named volume")
    condition = (phasewatch.get("depends_on") or {}).get("postgres", {}).get("condition")
    if condition != "service_healthy":
        problems.append(f"phasewatch waits for postgres {condition or 'not at all'}")
    problems += [
        f"{name} is never restarted"
        for name in services
        if services[name].get("restart", "no") == "no"
    ]
    return problems


def healthcheck_problems(compose: Mapping[str, Any], port: int) -> Problems:
    services = compose["services"]
    problems = [
        f"{name} has no healthcheck"
        for name in ("postgres", "phasewatch")
        if not (services[name].get("healthcheck") or {}).get("test")
    ]
    if problems:
        return problems
    postgres_test = services["postgres"]["healthcheck"]["test"]
    postgres_env = environment(services["postgres"])
    if "pg_isready" not in " ".join(command_list(postgres_test)):
        problems.append("postgres healthcheck does not use pg_isready")
    for variable in ("POSTGRES_USER", "POSTGRES_DB"):
        if postgres_env.get(variable) not in " ".join(command_list(postgres_test)):
            problems.append(f"pg_isready does not check {variable}")
    phasewatch_test = command_list(services["phasewatch"]["healthcheck"]["test"])
    return problems + healthcheck_url_problems(phasewatch_test, port)


def environment_problems(compose: Mapping[str, Any]) -> Problems:
    services = compose["services"]
    env = environment(services["phasewatch"])
    problems = [
        f"{name} is not a phasewatch setting (Settings has {sorted(SETTINGS_VARIABLES)})"
        for name in env
        if name.startswith("PHASEWATCH_") and name not in SETTINGS_VARIABLES
    ]
    if env.get("PHASEWATCH_API_TOKEN") != OPERATOR_ENV["PHASEWATCH_API_TOKEN"]:
        problems.append("PHASEWATCH_API_TOKEN is not passed from the environment")
    url = make_url(env.get("PHASEWATCH_DATABASE_URL") or "sqlite://")
    postgres = environment(services["postgres"])
    wanted = ("postgresql+psycopg", "postgres", 5432)
    if (url.drivername, url.host, url.port or 5432) != wanted:
        problems.append(f"database URL {url!r} is not psycopg on the postgres service")
    if (url.username, url.password, url.database) != (
        postgres.get("POSTGRES_USER"),
        postgres.get("POSTGRES_PASSWORD"),
        postgres.get("POSTGRES_DB"),
    ):
        problems.append("database URL's user, password or database differ from postgres's")
    for name in sorted(set(re.findall(r"\$\{(\w+)\}", EXAMPLE_TARGETS))):
        if name not in env:
            problems.append(f"{name}, used by the example targets file, is not passed through")
    return problems


def mount_problems(compose: Mapping[str, Any], options: Mapping[str, Any]) -> Problems:
    service = compose["services"]["phasewatch"]
    config = str(options["config"])
    config_mounts = [mount for mount in mounts(service) if mount.target == config]
    if not config_mounts:
        return [f"nothing is mounted at --config {config}"]
    problems = []
    if not config_mounts[0].read_only:
        problems.append(f"the targets file at {config} is mounted writable")
    spool = environment(service).get("PHASEWATCH_SPOOL_DIR") or dockerfile_env().get(
        "PHASEWATCH_SPOOL_DIR", str(Settings.model_fields["spool_dir"].default)
    )
    volumes = named_volume_mounts(compose, service)
    if not any(PurePosixPath(spool).is_relative_to(mount.target) for mount in volumes):
        problems.append(f"the spool {spool} is not in a named volume: lost on a restart")
    return problems


def port_problems(compose: Mapping[str, Any], port: int) -> Problems:
    published = [
        str(entry).rsplit(":", 1)[-1] for entry in compose["services"]["phasewatch"]["ports"]
    ]
    if str(port) not in published:
        return [f"serve listens on {port}; the ports published are {published}"]
    return []


def dockerfile_env() -> dict[str, str]:
    return parse_dockerfile()[-1].env()


def minimum_python() -> tuple[int, int]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    major, minor = re.findall(r"\d+", pyproject["project"]["requires-python"])[:2]
    return int(major), int(minor)


def base_image_problems(stages: list[Stage]) -> Problems:
    problems = []
    names = {stage.name for stage in stages if stage.name}
    for stage in stages:
        if stage.base in names:
            continue
        match = re.fullmatch(r"python:(\d+)\.(\d+)(?:\.\d+)?-slim(?:-\w+)?", stage.base)
        if match is None:
            problems.append(f"base image {stage.base} is not a slim Python image")
        elif (int(match.group(1)), int(match.group(2))) < minimum_python():
            problems.append(f"base image {stage.base} is older than requires-python")
    return problems


def image_problems(stages: list[Stage]) -> Problems:
    runtime = stages[-1]
    problems = base_image_problems(stages)
    user = (runtime.last("USER") or "root").split(":")[0]
    if user in ("root", "0"):
        problems.append("the container runs as root")
    entrypoint = exec_form(runtime.last("ENTRYPOINT") or "[]")
    cmd = exec_form(runtime.last("CMD") or "[]")
    problems += command_problems(entrypoint + cmd)
    if not problems and runtime.last("HEALTHCHECK") is None:
        problems.append("the image has no HEALTHCHECK")
    if problems:
        return problems
    port = parse_command(cmd)["port"]
    exposed = " ".join(runtime.all("EXPOSE")).split()
    if str(port) not in [entry.split("/")[0] for entry in exposed]:
        problems.append(f"serve listens on {port}, the image exposes {exposed}")
    health = healthcheck_command(runtime.last("HEALTHCHECK") or "")
    return problems + healthcheck_url_problems(health, port)


def build_problems(stages: list[Stage]) -> Problems:
    """The wheel is built from everything it packages; migrations ride along as data files."""
    copied = " ".join(args for stage in stages[:-1] for args in stage.all("COPY")).split()
    return [
        f"the build stage does not copy {needed}: the wheel would lack it"
        for needed in ("pyproject.toml", "README.md", "app", "migrations")
        if needed not in copied
    ]


def container_argv(compose: Mapping[str, Any]) -> list[str]:
    """What the phasewatch container runs: compose's entrypoint, else the image's, + command."""
    service = compose["services"]["phasewatch"]
    image_entrypoint = parse_dockerfile()[-1].last("ENTRYPOINT") or "[]"
    entrypoint = command_list(service.get("entrypoint")) or exec_form(image_entrypoint)
    return entrypoint + command_list(service.get("command"))


def required_variable_problems(text: str) -> Problems:
    """Compose must refuse to start, unset or empty, without the token or the password."""
    problems = []
    for name in OPERATOR_ENV:
        for without in ({}, {name: ""}):
            env = {key: value for key, value in OPERATOR_ENV.items() if key != name} | without
            try:
                load_compose(text, env)
            except MissingVariable as refused:
                if refused.name == name:
                    continue
            problems.append(f"compose starts with {name} {'empty' if without else 'unset'}")
    return problems


def all_compose_problems(text: str) -> Problems:
    compose = load_compose(text)
    problems = service_problems(compose) or command_problems(container_argv(compose))
    if problems:
        return problems
    options = parse_command(container_argv(compose)[1:])
    return (
        healthcheck_problems(compose, options["port"])
        + environment_problems(compose)
        + mount_problems(compose, options)
        + port_problems(compose, options["port"])
        + required_variable_problems(text)
    )


# --- Tests: the files as committed -------------------------------------------------------------


def test_compose_file_wires_services_command_environment_and_volumes() -> None:
    assert all_compose_problems(COMPOSE_TEXT) == []


def test_image_is_slim_not_root_runs_serve_and_checks_its_health() -> None:
    assert image_problems(parse_dockerfile()) == []


def test_image_builds_the_wheel_from_everything_it_ships() -> None:
    assert build_problems(parse_dockerfile()) == []


def test_image_and_compose_run_the_same_serve_options() -> None:
    runtime = parse_dockerfile()[-1]
    image_cmd = parse_command(exec_form(runtime.last("CMD") or "[]"))
    assert image_cmd == parse_command(container_argv(load_compose())[1:])
    assert runtime.env()["PHASEWATCH_CONFIG"] == str(image_cmd["config"])


def test_every_phasewatch_variable_the_image_sets_is_a_setting() -> None:
    assert {
        name for name in dockerfile_env() if name.startswith("PHASEWATCH_")
    } <= SETTINGS_VARIABLES


def test_the_token_and_provider_keys_reach_the_container_from_the_environment() -> None:
    env = environment(load_compose()["services"]["phasewatch"])
    assert env["PHASEWATCH_API_TOKEN"] == OPERATOR_ENV["PHASEWATCH_API_TOKEN"]
    provider_keys = set(re.findall(r"\$\{(\w+)\}", EXAMPLE_TARGETS))
    assert {"OPENAI_API_KEY", "ANTHROPIC_API_KEY"} <= provider_keys
    # No value in the file: compose passes the caller's variable, or leaves it unset.
    assert all(env[name] is None for name in provider_keys)


# --- Tests: each check fails when the file is wrong --------------------------------------------


def edited(old: str, new: str, text: str = COMPOSE_TEXT) -> str:
    assert old in text, f"{old!r} is no longer in the file: update this test"
    return text.replace(old, new)


COMPOSE_BREAKAGES: list[tuple[str, str, str]] = [
    ("image: postgres:16", "image: postgres:15", "not PostgreSQL 16"),
    ("      - postgres-data:/var/lib/postgresql/data", "", "not in a named volume"),
    ("restart: unless-stopped", "restart: 'no'", "is never restarted"),
    ("${PHASEWATCH_API_TOKEN:?", "${PHASEWATCH_API_TOKEN:-", "PHASEWATCH_API_TOKEN unset"),
    ("${PHASEWATCH_API_TOKEN:?", "${PHASEWATCH_API_TOKEN?", "PHASEWATCH_API_TOKEN empty"),
    ("PHASEWATCH_API_TOKEN: $", "OTHER_TOKEN: $", "PHASEWATCH_API_TOKEN is not passed"),
    ("${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}@", "${DB_PASSWORD:-x}@", "differ from"),
    ("    command: [", "    entrypoint: [python, -m, app]\n    command: [", "not phasewatch serve"),
    ("condition: service_healthy", "condition: service_started", "waits for postgres"),
    ('"--port", "8080",', '"--prot", "8080",', "does not accept"),
    ('"--host", "0.0.0.0", ', "", "binds loopback"),
    ('"--port", "8080",', '"--port", "8080", "--no-migrate",', "does not migrate"),
    ("PHASEWATCH_SPOOL_DIR:", "PHASEWATCH_SPOOL_DIRECTORY:", "not a phasewatch setting"),
    ("postgresql+psycopg://", "postgresql+psycopg2://", "not psycopg on the postgres service"),
    ("@postgres:5432/phasewatch", "@postgres:5432/other", "differ from postgres's"),
    ("      ANTHROPIC_API_KEY:\n", "", "ANTHROPIC_API_KEY, used by the example"),
    ("phasewatch.yaml:ro", "phasewatch.yaml", "mounted writable"),
    ("      - phasewatch-data:/var/lib/phasewatch\n", "", "not in a named volume: lost"),
    ('"127.0.0.1:8080:8080"', '"127.0.0.1:8080:9090"', "ports published"),
    ("127.0.0.1:8080/healthz", "127.0.0.1:8081/healthz", "healthcheck calls port 8081"),
    ("8080/healthz", "8080/health", "which phasewatch does not serve"),
    ('["CMD", "pg_isready", ', '["CMD", "true", ', "does not use pg_isready"),
]


@pytest.mark.parametrize(("old", "new", "complaint"), COMPOSE_BREAKAGES)
def test_a_broken_compose_file_is_caught(old: str, new: str, complaint: str) -> None:
    problems = all_compose_problems(edited(old, new))
    assert any(complaint in problem for problem in problems), problems


DOCKERFILE_BREAKAGES: list[tuple[str, str, str]] = [
    ("USER 10001:10001", "USER root", "runs as root"),
    ("USER 10001:10001\n", "", "runs as root"),
    ("FROM python:3.11-slim\n", "FROM python:3.11\n", "not a slim Python image"),
    ("FROM python:3.11-slim AS build", "FROM python:3.10-slim AS build", "older than"),
    ('ENTRYPOINT ["phasewatch"]', 'ENTRYPOINT ["python"]', "not phasewatch serve"),
    ('"8080", "--config"', '"9090", "--config"', "serve listens on 9090"),
    ('"--config", "/etc', '"--conf", "/etc', "does not accept"),
    ("HEALTHCHECK --interval", "# HEALTHCHECK --interval", "no HEALTHCHECK"),
    ("127.0.0.1:8080/healthz", "127.0.0.1:8081/healthz", "calls port 8081"),
    ("127.0.0.1:8080/healthz", "127.0.0.1:8080/", "calls /, which"),
]


@pytest.mark.parametrize(("old", "new", "complaint"), DOCKERFILE_BREAKAGES)
def test_a_broken_dockerfile_is_caught(old: str, new: str, complaint: str) -> None:
    problems = image_problems(parse_dockerfile(edited(old, new, DOCKERFILE_TEXT)))
    assert any(complaint in problem for problem in problems), problems


def test_a_build_stage_without_the_migrations_is_caught() -> None:
    broken = edited("COPY migrations ./migrations\n", "", DOCKERFILE_TEXT)
    assert build_problems(parse_dockerfile(broken)) == [
        "the build stage does not copy migrations: the wheel would lack it"
    ]


def test_a_missing_service_is_caught() -> None:
    broken = edited("  postgres:\n    image", "  database:\n    image")
    assert all_compose_problems(broken) == ["no postgres service"]


# --- The parsers themselves --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "env", "expected"),
    [
        ("${A}", {"A": "1"}, "1"),
        ("${A}", {}, ""),
        ("$A/x", {"A": "1"}, "1/x"),
        ("${A:-d}", {"A": ""}, "d"),
        ("${A-d}", {"A": ""}, ""),
        ("${A:-d}", {}, "d"),
        ("$${A}", {"A": "1"}, "${A}"),
        ("u:${A:?say}@h", {"A": "p"}, "u:p@h"),
    ],
)
def test_interpolation_follows_compose(value: str, env: dict[str, str], expected: str) -> None:
    assert interpolate(value, env) == expected


@pytest.mark.parametrize(
    ("value", "env"), [("${A:?say}", {}), ("${A:?say}", {"A": ""}), ("${A?x}", {})]
)
def test_interpolation_refuses_a_required_variable_that_is_unset(
    value: str, env: dict[str, str]
) -> None:
    with pytest.raises(MissingVariable):
        interpolate(value, env)


def test_dockerfile_parser_joins_continuations_and_skips_comments() -> None:
    stages = parse_dockerfile(
        "# c\nFROM a:1 AS one\nRUN x \\\n  # inside\n  && y\n"
        "FROM --platform=p b:2\nENV A=1 \\\n B=2\n"
    )
    assert [(stage.base, stage.name) for stage in stages] == [("a:1", "one"), ("b:2", None)]
    assert stages[0].instructions == [("RUN", "x  && y")]
    assert stages[1].env() == {"A": "1", "B": "2"}


def test_the_command_parser_rejects_what_phasewatch_would() -> None:
    assert parse_command(["serve", "--port", "9"])["port"] == 9
    for bad in (["serve", "--port", "x"], ["serve", "--nope"], ["sereve"], []):
        with pytest.raises(TyperException):
            parse_command(bad)


# --- The healthcheck command against a real serve ----------------------------------------------


def healthcheck_runner(argv: list[str]) -> Callable[[int], int]:
    """Runs the healthcheck as the container would, against a serve on another port."""

    def run(port: int) -> int:
        command = [sys.executable if word == "python" else word for word in argv]
        command = [word.replace("127.0.0.1:8080", f"127.0.0.1:{port}") for word in command]
        return subprocess.run(command, capture_output=True, timeout=30, check=False).returncode

    return run


@pytest.mark.process
def test_the_healthcheck_passes_while_serve_answers_and_fails_once_it_stops(
    tmp_path: Path,
) -> None:
    config = tmp_path / "phasewatch.yaml"
    config.write_text("targets: []\n")
    compose_check = command_list(load_compose()["services"]["phasewatch"]["healthcheck"]["test"])
    image_check = healthcheck_command(parse_dockerfile()[-1].last("HEALTHCHECK") or "")
    checks = [healthcheck_runner(compose_check[1:]), healthcheck_runner(image_check)]
    server = Served(tmp_path, config)
    try:
        # Longer than test_serve's wait: the machine is shared, and this is no speed test.
        eventually(
            lambda: server.health() is not None or server.process.poll() is not None, 90, "up"
        )
        assert [check(server.port) for check in checks] == [0, 0], server.output()
        server.stop()
        assert all(check(server.port) != 0 for check in checks)
    finally:
        server.kill()
