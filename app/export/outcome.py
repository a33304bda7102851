"""Whether a signal's exports reach the collector: a failure is counted every time and said
once (one log line when exports start failing, one when they work again), never a hang."""

from __future__ import annotations

import logging
import threading

log = logging.getLogger(__name__)


class ExportOutcome:
    def __init__(self, signal: str, endpoint: str) -> None:
        self.signal = signal  # "metrics" or "traces"
        self.endpoint = endpoint
        self.failures = 0
        self.failing = False
        self._lock = threading.Lock()

    def record(self, ok: bool) -> None:
        """One export attempt's result (the SDK's own retries are inside one attempt)."""
        with self._lock:
            if ok:
                if self.failing:
                    log.info("OpenTelemetry %s export to %s works again", *self._named())
                self.failing = False
                return
            self.failures += 1
            if not self.failing:
                log.warning(
                    "OpenTelemetry %s export to %s failed; dropped, not retried later. Said"
                    " once until it works again; counted in phasewatch_otel_export_failures",
                    *self._named(),
                )
            self.failing = True

    def problem(self) -> str | None:
        if not self.failing:
            return None
        signal, endpoint = self._named()
        return f"OpenTelemetry {signal} export to {endpoint} failing ({self.failures} failed)"

    def _named(self) -> tuple[str, str]:
        return self.signal, self.endpoint
