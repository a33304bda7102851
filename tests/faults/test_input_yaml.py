"""A hostile targets file is refused fast and in one line: alias bombs, files past the size
limit, nesting past the depth limit, bytes that are not UTF-8, a key given twice; by
`check-config`, by `serve` at start, and by a running `serve` reloading it (which keeps its
targets)."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.config import ConfigError, load_targets
from app.config.safeyaml import MAX_ALIAS_NODES, MAX_DEPTH, MAX_FILE_BYTES
from app.demo.sim.server import SimServer
from tests.faults.limited import run_limited
from tests.helpers import eventually
from tests.runtime.test_serve import Served, targets_file

# Ten lines, nine lists of nine: 9⁹ (387 million) strings once every alias is followed.
# The aliases of line 7 are the first to pass the budget.
BOMB = "targets: []\na: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]\n"
    for prev, name in zip("abcdefg", "bcdefgh", strict=True)
)
NOT_UTF8 = b'targets:\n  - name: a\n    url: http://x/\n    headers: {X-K: "caf\xe9"}\n'
NOT_UTF8_OFFSET = NOT_UTF8.index(b"\xe9")  # 59, on line 4
GOOD = "targets:\n  - {name: a, url: 'http://x/'}\n"

HOSTILE = {
    "bomb": (BOMB.encode(), f"bomb.yaml:7: aliases stand for more than {MAX_ALIAS_NODES} nodes"),
    "oversized": (
        GOOD.encode() + b"#" * MAX_FILE_BYTES + b"\n",
        f"oversized.yaml: larger than {MAX_FILE_BYTES} bytes, the limit",
    ),
    "deep": (
        b"targets: []\nvantage: " + b"[" * 100_000 + b"]" * 100_000 + b"\n",
        f"deep.yaml:2: nested deeper than {MAX_DEPTH} levels",
    ),
    "cycle": (b"targets: &t [*t]\n", "cycle.yaml:1: the alias *t is inside the node it names"),
    "not-utf8": (
        NOT_UTF8,
        f"not-utf8.yaml:4: not UTF-8 text: byte 0xe9 at byte offset {NOT_UTF8_OFFSET} ",
    ),
    "duplicate-key": (
        b"targets:\n  - name: a\n    url: http://x/\n    url: http://y/\n",
        "duplicate-key.yaml:4: the key 'url' appears twice in one mapping (line 3)",
    ),
    "nul": (
        GOOD.encode() + b"vantage: a\x00b\n",
        "nul.yaml: not valid YAML: line 3: character #x0000",
    ),
}


def hostile(tmp_path: Path, case: str) -> tuple[Path, str]:
    data, expected = HOSTILE[case]
    path = tmp_path / f"{case}.yaml"
    path.write_bytes(data)
    return path, expected


@pytest.fixture(scope="module")
def idle_rss_mb(tmp_path_factory: pytest.TempPathFactory) -> float:
    """The peak of a child that reads nothing. A forked child's high-water mark starts at
    the parent's size (pytest's, late in a long session), so peaks are compared with this."""
    return run_limited(["check-config", "--help"], tmp_path_factory.mktemp("idle")).peak_rss_mb


@pytest.mark.process
@pytest.mark.parametrize("case", list(HOSTILE))
def test_check_config_refuses_in_one_line_naming_file_line_and_reason(
    tmp_path: Path, case: str, idle_rss_mb: float
) -> None:
    path, expected = hostile(tmp_path, case)
    done = run_limited(["check-config", str(path)], tmp_path)
    assert done.code == 1, done.err
    problem, summary = done.err.splitlines()  # the problem, then how many there were
    assert problem.removeprefix(f"{tmp_path}/").startswith(expected), problem
    assert summary == f"phasewatch: error: {path}: 1 problem(s)"
    # Before: the bomb took 2.2 GB and a minute; now little more than an idle child.
    assert done.peak_rss_mb - idle_rss_mb < 90, (done.peak_rss_mb, idle_rss_mb)


@pytest.mark.process
def test_serve_refuses_to_start_on_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    path, expected = hostile(tmp_path, "not-utf8")
    done = run_limited(["serve", "--config", str(path)], tmp_path)
    assert done.code == 1 and "Traceback" not in done.err, done.err
    assert done.err.splitlines()[0] == f"{tmp_path}/{expected}(invalid continuation byte)"


def test_aliases_and_merge_keys_within_the_budget_still_load(tmp_path: Path) -> None:
    path = tmp_path / "anchors.yaml"
    path.write_text(
        "targets:\n"
        "  - &first {name: a, url: 'http://x/', interval: 30s,"
        " headers: &auth {Authorization: Bearer t}}\n"
        "  - {<<: *first, name: b, headers: *auth}\n"
    )
    first, second = load_targets(path, {}).targets
    assert (second.name, second.interval, second.url) == ("b", 30, "http://x/")
    assert second.headers == first.headers == {"Authorization": "Bearer t"}


def test_a_file_of_exactly_the_size_limit_is_read(tmp_path: Path) -> None:
    path = tmp_path / "full.yaml"
    padding = MAX_FILE_BYTES - len(GOOD) - 1
    path.write_text(GOOD + "#" * padding + "\n")
    assert path.stat().st_size == MAX_FILE_BYTES
    assert [t.name for t in load_targets(path, {}).targets] == ["a"]


def test_aliases_up_to_the_budget_load_and_one_more_is_refused(tmp_path: Path) -> None:
    # ``*s`` stands for 100 nodes (the list and its 99 items): the budget holds that many.
    uses = MAX_ALIAS_NODES // 100
    items = ", ".join(["x"] * 99)
    aliases = ", ".join(["*s"] * uses)
    path = tmp_path / "wide.yaml"
    path.write_text(
        f"targets:\n  - name: a\n    url: http://x/\n    body: [&s [{items}], {aliases}]\n"
    )
    [target] = load_targets(path, {}).targets
    assert len(target.body) == uses + 1
    path.write_text(path.read_text().replace("*s]", "*s, *s]"))
    with pytest.raises(ConfigError) as caught:
        load_targets(path, {})
    assert caught.value.problems == [
        f"{path}:4: aliases stand for more than {MAX_ALIAS_NODES} nodes, the limit for a "
        "targets file (an alias bomb?)"
    ]


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[Callable[[Path], Served]]:
    started: list[Served] = []

    def start(config: Path) -> Served:
        started.append(Served(tmp_path, config))
        return started[-1]

    yield start
    for server in started:
        server.kill()


def peak_rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


@pytest.mark.process
@pytest.mark.parametrize("case", ["bomb", "not-utf8", "oversized"])
def test_a_running_serve_refuses_the_reload_in_one_line_and_keeps_probing(
    tmp_path: Path, sim: SimServer, serving: Callable[[Path], Served], case: str
) -> None:
    config = targets_file(tmp_path, sim, "steady", interval="1s", samples="1")
    server = serving(config)
    server.wait_ready()
    before_mb = peak_rss_mb(server.process.pid)
    config.write_bytes(HOSTILE[case][0])
    server.process.send_signal(signal.SIGHUP)
    eventually(lambda: "reload refused" in server.output(), 20, "hostile file refused")
    runs = len(server.runs("steady"))
    eventually(lambda: len(server.runs("steady")) >= runs + 2, 10, "still probing")
    output = server.output()
    [refusal] = [line for line in output.splitlines() if "reload refused" in line]
    expected = HOSTILE[case][1].replace(f"{case}.yaml", "phasewatch.yaml")
    assert f"keeping the running targets: {tmp_path}/{expected}" in refusal
    assert "Traceback" not in output
    # Before: the bomb's reload grew serve from 183 to 1,311 MB.
    assert peak_rss_mb(server.process.pid) - before_mb < 100
