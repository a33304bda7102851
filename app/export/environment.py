"""Export is off unless an OTLP endpoint is set, the standard way: ``OTEL_EXPORTER_OTLP_ENDPOINT``
(both signals, at ``/v1/metrics`` and ``/v1/traces`` under it) or a signal's own
``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`` / ``…_TRACES_ENDPOINT`` (used as it is).
``OTEL_METRICS_EXPORTER=none`` / ``OTEL_TRACES_EXPORTER=none`` turn one signal off,
``OTEL_SDK_DISABLED=true`` both."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from app.export.exporter import RunExporter

log = logging.getLogger(__name__)


class ExportSettingsError(ValueError):
    """An ``OTEL_*`` setting the SDK refuses (``OTEL_BSP_MAX_QUEUE_SIZE`` below the batch
    size, an unknown compression): serve says which and does not start."""


# signal: (its own endpoint variable, its exporter choice variable, its path under the base)
SIGNALS = {
    "metrics": ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_METRICS_EXPORTER", "v1/metrics"),
    "traces": ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER", "v1/traces"),
}
PROTOCOL = "http/protobuf"


def endpoints(environ: Mapping[str, str]) -> dict[str, str]:
    """The signals to export and their URLs; empty: export is off."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return {}
    base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip().rstrip("/")
    found = {}
    for signal, (own, choice, path) in SIGNALS.items():
        if environ.get(choice, "").strip().lower() == "none":
            continue
        endpoint = environ.get(own, "").strip() or (f"{base}/{path}" if base else "")
        if endpoint:
            found[signal] = endpoint
    return found


def exporter_from_environment(environ: Mapping[str, str]) -> RunExporter | None:
    found = endpoints(environ)
    if not found:
        return None
    protocol = environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", PROTOCOL).strip() or PROTOCOL
    if protocol != PROTOCOL:
        log.warning(
            "OTEL_EXPORTER_OTLP_PROTOCOL=%s: phasewatch exports %s only", protocol, PROTOCOL
        )
    # The SDK is imported only when export is on: other processes never load it.
    from app.export.otlp import OtlpExporter

    try:
        exporter = OtlpExporter(found)
    except ValueError as exc:
        raise ExportSettingsError(f"OpenTelemetry export: {exc}") from exc
    log.info("OpenTelemetry export: %s", ", ".join(f"{s} to {url}" for s, url in found.items()))
    return exporter
