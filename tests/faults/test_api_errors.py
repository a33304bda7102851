"""The API is what /openapi.json says: every error a real `serve` answers is documented on
its route, in the one shape the document declares (``{"detail": "<sentence>"}``, plus
``errors`` for a request that fails validation)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.config import Settings, TargetsFile
from app.main import create_app
from tests.runtime.test_serve import Served

pytestmark = pytest.mark.timeout(60)
TOKEN = "errors-test-token-0123456789"
ERROR_REF = "#/components/schemas/ErrorOut"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """One serve for the module: every request here only reads or is refused, so none
    changes what the next test sees."""
    workdir = tmp_path_factory.mktemp("api-errors")
    config = workdir / "phasewatch.yaml"
    config.write_text("targets:\n  - name: chat\n    url: http://127.0.0.1:9/\n    interval: 1d\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PHASEWATCH_API_TOKEN", TOKEN)
        server = Served(workdir, config)
    try:
        server.wait_ready()
        with httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=10) as http:
            yield http
    finally:
        server.kill()


def documented(spec: dict[str, Any], method: str, template: str, status: int) -> dict[str, Any]:
    responses: dict[str, Any] = spec["paths"][template][method]["responses"]
    assert str(status) in responses, (method, template, status, sorted(responses))
    found: dict[str, Any] = responses[str(status)]
    return found


# No run, silence or alert has it. Fixed, not uuid4(): a parameter is part of the test's id,
# and pytest-xdist's workers must all collect the same ids.
UNKNOWN_ID = "5b0e3c1a-7d2f-4e8b-9a6c-1f2e3d4c5b6a"
ANSWERS = [
    # (method, path, body, status, the route's template)
    ("get", "/api/v1/runs?limit=0", None, 422, "/api/v1/runs"),
    ("get", "/api/v1/runs?from=yesterday", None, 422, "/api/v1/runs"),
    ("get", "/api/v1/runs?target=nothing", None, 404, "/api/v1/runs"),
    ("get", "/api/v1/samples?target=nothing", None, 404, "/api/v1/samples"),
    ("get", "/api/v1/alerts?cursor=garbage", None, 422, "/api/v1/alerts"),
    ("get", f"/api/v1/runs/{UNKNOWN_ID}", None, 404, "/api/v1/runs/{run_id}"),
    ("get", "/api/v1/runs/not-a-uuid", None, 422, "/api/v1/runs/{run_id}"),
    ("get", "/api/v1/targets/nothing/history", None, 404, "/api/v1/targets/{name}/history"),
    ("post", "/api/v1/silences", {"matchers": []}, 401, "/api/v1/silences"),
    ("delete", f"/api/v1/silences/{UNKNOWN_ID}", None, 401, "/api/v1/silences/{silence_id}"),
    (
        "post",
        f"/api/v1/alerts/{UNKNOWN_ID}/acknowledge",
        {"by": "me"},
        401,
        "/api/v1/alerts/{alert_id}/acknowledge",
    ),
]


@pytest.mark.process
@pytest.mark.parametrize(("method", "path", "body", "status", "template"), ANSWERS)
def test_every_error_answered_is_documented_on_its_route_in_the_shared_shape(
    client: httpx.Client, method: str, path: str, body: Any, status: int, template: str
) -> None:
    spec = client.get("/openapi.json").json()
    response = client.request(method.upper(), path, json=body)
    assert response.status_code == status, response.text
    answer = documented(spec, method, template, status)
    assert answer["content"]["application/json"]["schema"] == {"$ref": ERROR_REF}
    assert isinstance(response.json()["detail"], str)


@pytest.mark.process
def test_a_validation_error_is_a_sentence_and_a_list_of_problems(client: httpx.Client) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    body = {"matchers": [{"name": "1x", "value": "v"}], "createdBy": ""}
    response = client.post("/api/v1/silences", json=body, headers=headers)
    assert response.status_code == 422
    answer = response.json()
    assert answer["detail"].startswith("body.matchers.0.name: String should match pattern")
    assert "body.createdBy: String should have at least 1 character" in answer["detail"]
    assert [e["loc"] for e in answer["errors"]] == [
        ["body", "matchers", 0, "name"],
        ["body", "createdBy"],
    ]
    assert {"msg", "type"} <= set(answer["errors"][0])


# An agent's token opens exactly its own vantage: reading its assignment or reporting its
# status, there is nothing it could be forbidden (pushes can be: 403).
AGENTS_WITHOUT_403 = ("/api/v1/agent/config", "/api/v1/agent/status")


@pytest.mark.process
def test_the_document_declares_no_other_error_shape(client: httpx.Client) -> None:
    spec = client.get("/openapi.json").json()
    assert "HTTPValidationError" not in spec["components"]["schemas"]
    for template, operations in spec["paths"].items():
        if not template.startswith("/api/v1/"):
            continue
        for method, operation in operations.items():
            codes = {int(code) for code in operation["responses"] if code.startswith("4")}
            # Operations without a parameter to validate (nor, for agents, a 403 to give).
            assert (
                {400, 422} <= codes
                or (template, codes) == ("/api/v1/", {400})
                or (template, codes) == ("/api/v1/targets", {400})
                or (template, codes) == ("/api/v1/vantages", {400})
                or (template, codes) == ("/api/v1/agent/config", {400, 401})
                or (template == "/api/v1/version")
            ), (method, template, codes)
            if "security" in operation and template not in AGENTS_WITHOUT_403:
                assert {401, 403} <= codes, (method, template)
            for code in codes:
                content = operation["responses"][str(code)]["content"]
                assert content["application/json"]["schema"] == {"$ref": ERROR_REF}


@pytest.mark.process
def test_a_method_a_path_lacks_is_405_naming_every_method_it_has(client: httpx.Client) -> None:
    path = f"/api/v1/silences/{uuid.uuid4()}"
    response = client.request("OPTIONS", path)
    assert response.status_code == 405
    assert response.headers["allow"] == "DELETE, GET"
    assert client.request("PUT", "/api/v1/silences").headers["allow"] == "GET, POST"


@pytest.mark.parametrize(
    ("token", "host", "security"),
    [
        (TOKEN, "127.0.0.1", [{"HTTPBearer": []}]),
        (None, "127.0.0.1", [{"HTTPBearer": []}, {}]),  # writes are open: no token needed
        (None, "0.0.0.0", [{"HTTPBearer": []}]),
    ],
)
def test_the_document_says_a_token_is_optional_only_where_writes_are_open(
    token: str | None, host: str, security: list[dict[str, Any]], tmp_path: Path
) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path}/x.db", host=host, api_token=token)
    app = create_app(settings, TargetsFile(targets=[]), probing=False)
    try:
        spec = app.openapi()
        assert spec["paths"]["/api/v1/silences"]["post"]["security"] == security
        assert app.openapi() is spec
    finally:
        app.state.service.engine.dispose()
