"""A real `serve`: a blank token is no token, and a foreign ``Host`` (DNS rebinding) is 400."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from app.config import Settings
from app.web.hosts import allowed_hosts
from tests.runtime.test_serve import Served

pytestmark = pytest.mark.timeout(60)
TOKEN = "host-test-token-0123456789"


def empty_targets(tmp_path: Path) -> Path:
    config = tmp_path / "phasewatch.yaml"
    config.write_text("targets: []\n")
    return config


def fetch(server: Served, path: str, host: str) -> httpx.Response:
    url = f"http://127.0.0.1:{server.port}{path}"
    return httpx.get(url, headers={"Host": host}, timeout=10)


@pytest.mark.process
@pytest.mark.parametrize("blank", ["   ", "\t", " \n "])
def test_serve_refuses_a_public_bind_with_a_token_of_white_space_only(
    blank: str, tmp_path: Path, served: Callable[..., Served], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PHASEWATCH_API_TOKEN", blank)
    server = served(empty_targets(tmp_path), "--host", "0.0.0.0")
    assert server.process.wait(timeout=30) == 1
    assert "refusing to bind 0.0.0.0 without PHASEWATCH_API_TOKEN" in server.output()


@pytest.mark.process
def test_a_loopback_serve_answers_loopback_names_and_refuses_any_other_host(
    tmp_path: Path, served: Callable[..., Served], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PHASEWATCH_ALLOWED_HOSTS", raising=False)
    server = served(empty_targets(tmp_path))
    server.wait_ready()
    port = server.port
    for host in ("localhost", f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"):
        for path in ("/", "/api/v1/targets", "/healthz"):
            assert fetch(server, path, host).status_code == 200, (host, path)
    for host in ("evil.example", f"evil.example:{port}", "localhost.evil.example", "10.0.0.1"):
        for path in ("/", "/api/v1/targets", "/api/v1/alerts"):
            response = fetch(server, path, host)
            assert (response.status_code, response.text) == (400, "Invalid host header")


@pytest.mark.process
def test_allowed_hosts_replaces_the_loopback_names(
    tmp_path: Path, served: Callable[..., Served], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PHASEWATCH_ALLOWED_HOSTS", "dash.example, 127.0.0.1")
    server = served(empty_targets(tmp_path))
    server.wait_ready()
    assert fetch(server, "/api/v1/targets", "dash.example").status_code == 200
    assert fetch(server, "/api/v1/targets", "DASH.example:443").status_code == 200
    assert fetch(server, "/api/v1/targets", "localhost").status_code == 400


@pytest.mark.parametrize(
    ("host", "given", "expected"),
    [
        ("127.0.0.1", None, ["localhost", "127.0.0.1", "[::1]"]),
        ("::1", None, ["localhost", "127.0.0.1", "[::1]"]),
        ("127.0.0.2", None, ["localhost", "127.0.0.1", "[::1]", "127.0.0.2"]),
        ("0.0.0.0", None, ["*"]),
        ("0.0.0.0", "a.example,*.b.example", ["a.example", "*.b.example"]),
        ("127.0.0.1", " , ", ["localhost", "127.0.0.1", "[::1]"]),
    ],
)
def test_the_default_allow_list_follows_the_bind_address(
    host: str, given: str | None, expected: list[str]
) -> None:
    settings = Settings(host=host, allowed_hosts=given)
    assert allowed_hosts(settings) == expected


@pytest.mark.parametrize("wrong", ["http://a.example", "a.example:8080", "a*.example", "a b"])
def test_an_allowed_host_that_is_not_a_name_is_refused(wrong: str) -> None:
    with pytest.raises(ValueError, match="not a host name"):
        Settings(allowed_hosts=wrong)
