"""The OpenAPI document names each of its models plainly: two models of one name in two
modules make FastAPI prefix both with their module (``app__web__schemas__VantageOut``),
a name that leaks the code's layout into every client generated from the document."""

from __future__ import annotations

from pathlib import Path

from app.config import Settings, TargetsFile
from app.main import create_app
from app.web.deps import service_of


def test_no_openapi_component_name_needs_a_module_prefix(tmp_path: Path) -> None:
    settings = Settings(
        config=tmp_path / "phasewatch.yaml",
        database_url=f"sqlite:///{tmp_path / 'phasewatch.db'}",
        spool_dir=tmp_path / "spool",
    )
    app = create_app(settings, TargetsFile())
    try:
        names = app.openapi()["components"]["schemas"]
    finally:
        service_of(app).engine.dispose()
    assert names, "no component at all: the document is not what this test reads"
    prefixed = sorted(name for name in names if "__" in name)
    assert not prefixed, f"rename one of each clashing pair by its owner: {prefixed}"
