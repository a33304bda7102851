"""``/metrics`` in the Prometheus text format (OpenMetrics when the scraper asks for it)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client.exposition import choose_encoder

from app.web.deps import MetricsDep

router = APIRouter()


@router.get("/metrics", include_in_schema=False)
def metrics(request: Request, observed: MetricsDep) -> Response:
    # A plain def: FastAPI runs it in a worker thread, and the alert gauges read the database.
    encode, content_type = choose_encoder(request.headers.get("accept", ""))
    return Response(encode(observed.registry), media_type=content_type)
