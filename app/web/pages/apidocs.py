"""GET /docs — Swagger UI for the OpenAPI document, from the vendored copy in static/swagger-ui.

FastAPI's own /docs loads Swagger UI (and a favicon) from a CDN: a blank page on a host
without the internet, and a request to another host from every visitor's browser. So the
app turns those off (``create_app``: ``docs_url=None, redoc_url=None``) and this serves the
same page with local files.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse

from app import __version__

router = APIRouter()

ASSETS = "/static/swagger-ui"


@router.get("/docs", response_class=HTMLResponse, include_in_schema=False)
def api_docs(request: Request) -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url=request.app.openapi_url or "/openapi.json",
        title=f"{request.app.title} — API",
        swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js?v={__version__}",
        swagger_css_url=f"{ASSETS}/swagger-ui.css?v={__version__}",
        swagger_favicon_url=f"/static/favicon.svg?v={__version__}",
    )
