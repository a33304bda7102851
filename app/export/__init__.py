"""Stored runs out to an OpenTelemetry backend: metrics by the semantic conventions and a
span per sample with its phases as children (docs/integrations.md, "OpenTelemetry").

``facts`` (what a target says about its requests), ``mapping`` (pure: a run → metric
points and span specs), ``exporter`` (the seam: ``RunExporter`` and its memory
implementation), ``otlp`` (the OpenTelemetry SDK over OTLP/HTTP), ``outcome`` (export
failures, said once and counted), ``environment`` (on only when an OTLP endpoint is set).
"""
