"""A read on a database that refuses connections is a 503 with ``Retry-After`` and a sentence
(JSON for the API, a page for the dashboard), never a 500; what is answered from memory
stays 200. The frozen database, and the deadline on a read already under way, are
``tests/faults/test_outage_reads.py``'s."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.config import Settings
from app.main import create_app
from app.web.unavailable import RETRY_AFTER_S
from tests.apiapp import in_process, targets


@pytest.fixture
def client(tmp_path: Path, refused_port: int) -> Iterator[httpx.Client]:
    config = tmp_path / "phasewatch.yaml"
    config.write_text("targets: []\n")
    settings = Settings(
        config=config,
        database_url=f"postgresql://postgres@127.0.0.1:{refused_port}/away",
        spool_dir=tmp_path / "spool",
    )
    with in_process(create_app(settings, targets("api"))) as started:
        yield started


@pytest.mark.parametrize(
    "path", ["/api/v1/targets", "/api/v1/runs", "/api/v1/silences", "/api/v1/version"]
)
def test_an_api_read_is_a_503_that_says_the_database_is_unreachable(
    client: httpx.Client, path: str
) -> None:
    response = client.get(path)
    assert response.status_code == 503
    assert response.headers["Retry-After"] == str(RETRY_AFTER_S)
    assert response.json()["detail"].startswith("the database is unreachable: ")


@pytest.mark.parametrize("path", ["/", "/targets/api", "/alerts"])
def test_a_page_is_a_503_page(client: httpx.Client, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 503
    assert response.headers["Retry-After"] == str(RETRY_AFTER_S)
    assert response.headers["content-type"].startswith("text/html")
    assert "Database unavailable" in response.text


@pytest.mark.parametrize("path", ["/healthz", "/metrics", "/openapi.json", "/api/v1/"])
def test_what_needs_no_database_answers_200(client: httpx.Client, path: str) -> None:
    assert client.get(path).status_code == 200


def test_the_openapi_document_declares_the_503(client: httpx.Client) -> None:
    document = client.get("/openapi.json").json()
    assert "503" in document["paths"]["/api/v1/targets"]["get"]["responses"]
