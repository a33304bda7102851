"""PagerDuty Events API v2: ``POST {url}`` (``https://events.pagerduty.com/v2/enqueue``)
with one event per notification.

A firing alert is a ``trigger`` and its resolution a ``resolve``, both with the same
``dedup_key``: ``Delivery.alert_key``, one per (alert, notifier), so the resolution closes
the incident the firing opened, and a repeated trigger (delivery is at least once) lands on
that same open incident instead of opening another. Recovering is still firing: a trigger
again, which PagerDuty folds into the open incident. The ``Idempotency-Key`` header goes
along as with every notifier; PagerDuty ignores it.

The routing key (the integration key of a service's "Events API v2" integration) is the
secret: ``routing_key: ${PAGERDUTY_ROUTING_KEY}``. PagerDuty answers 202; 400 (an invalid
event or key) is permanent, 429 and 5xx are tried again.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.notifiers import http
from app.notifiers.base import Delivery, Notifier, Secret, rfc3339

EVENTS_URL = "https://events.pagerduty.com/v2/enqueue"
# PagerDuty's four severities; phasewatch's are critical and warning, anything else is error.
SEVERITIES = frozenset({"critical", "error", "warning", "info"})
_MAX_SUMMARY = 1024  # PagerDuty cuts a longer summary; cut here, with a mark


class PagerDutyConfig(BaseModel):
    # Errors never echo what was given: it may be a secret.
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    type: Literal["pagerduty"] = Field(description="The notifier kind.")
    routing_key: Secret = Field(
        description="The integration key of an Events API v2 integration; `${ENV}` expands."
    )
    url: str = Field(
        EVENTS_URL,
        pattern=r"^https?://[^/\s]+",
        description="The Events API v2 endpoint (EU accounts: events.eu.pagerduty.com).",
    )
    timeout: float = Field(10.0, gt=0, le=120, description="Seconds for the whole exchange.")
    external_url: str | None = Field(
        None, pattern=r"^https?://", description="phasewatch's own address, for links back."
    )


class PagerDuty(Notifier[PagerDutyConfig]):
    async def notify(self, delivery: Delivery) -> None:
        key = self.config.routing_key.get_secret_value()
        endpoint = http.Endpoint(
            url=self.config.url, timeout_s=self.config.timeout, body_secrets=(key,)
        )
        body = event(key, delivery, self.config.external_url)
        await http.post_json(endpoint, body, delivery.idempotency_key)


def event(routing_key: str, delivery: Delivery, external_url: str | None = None) -> dict[str, Any]:
    """One Events API v2 event: a ``resolve`` carries the key and nothing else."""
    base = {"routing_key": routing_key, "dedup_key": delivery.alert_key}
    if delivery.resolved:
        return base | {"event_action": "resolve"}
    found: dict[str, Any] = base | {
        "event_action": "trigger",
        "payload": _payload(delivery),
        "client": "phasewatch",
    }
    if external_url:
        found |= {
            "client_url": external_url,
            "links": [{"href": external_url, "text": "phasewatch"}],
        }
    return found


def _payload(delivery: Delivery) -> dict[str, Any]:
    p = delivery.payload
    severity = str(p.get("severity", ""))
    labels = delivery.labels
    return {
        "summary": _cut(delivery.summary),
        "source": str(p.get("vantage") or "phasewatch"),
        "severity": severity if severity in SEVERITIES else "error",
        "timestamp": rfc3339(delivery.starts_at),
        "component": str(p.get("target", "")),
        "group": str(p.get("scope", "")),
        "class": labels.get("alertname", "alert"),
        "custom_details": {**labels, **delivery.numbers, "state": delivery.state},
    }


def _cut(text: str) -> str:
    return text if len(text) <= _MAX_SUMMARY else text[: _MAX_SUMMARY - 1] + "…"
