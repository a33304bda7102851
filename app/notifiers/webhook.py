"""Generic webhook: the JSON Alertmanager's own webhook receiver sends (version "4").

One notification carries one alert, so its group is the alert: ``groupLabels`` and
``commonLabels`` are the alert's labels and ``groupKey`` is what Alertmanager would
write for a route grouping by every label (``group_by: ['...']``). Anything that
already consumes Alertmanager webhooks consumes these; a test compares them field by field
with what a real Alertmanager sends for the same alert. One field is phasewatch's own:
``idempotencyKey``, the ``Idempotency-Key`` header's value, for receivers that drop repeats.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.notifiers import http
from app.notifiers.base import (
    Delivery,
    Notifier,
    Secret,
    SecretUrl,
    fingerprint,
    rfc3339,
)
from app.probe.headername import HeaderName

ZERO_TIME = "0001-01-01T00:00:00Z"  # Go's zero time: what Alertmanager writes for "no end"


class WebhookConfig(BaseModel):
    # Errors never echo what was given: it may be a secret.
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    type: Literal["webhook"] = Field(description="The notifier kind.")
    url: SecretUrl = Field(description="The receiver's URL; `${ENV}` expands.")
    headers: dict[HeaderName, Secret] = Field(
        default_factory=dict, description="Extra request headers; `${ENV}` expands."
    )
    timeout: float = Field(10.0, gt=0, le=120, description="Seconds for the whole exchange.")
    external_url: str | None = Field(
        None, pattern=r"^https?://", description="phasewatch's own address, for links back."
    )


class Webhook(Notifier[WebhookConfig]):
    async def notify(self, delivery: Delivery) -> None:
        endpoint = http.Endpoint(
            url=self.config.url.get_secret_value(),
            timeout_s=self.config.timeout,
            headers={name: value.get_secret_value() for name, value in self.config.headers.items()},
        )
        body = message(self.name, delivery, self.config.external_url)
        await http.post_json(endpoint, body, delivery.idempotency_key)


def message(receiver: str, delivery: Delivery, external_url: str | None = None) -> dict[str, Any]:
    labels = delivery.labels
    annotations = delivery.annotations
    return {
        "version": "4",
        "groupKey": group_key(labels),
        "truncatedAlerts": 0,
        "status": delivery.status,
        "receiver": receiver,
        "groupLabels": labels,
        "commonLabels": labels,
        "commonAnnotations": annotations,
        "externalURL": external_url or "",
        "idempotencyKey": delivery.idempotency_key,
        "alerts": [
            {
                "status": delivery.status,
                "labels": labels,
                "annotations": annotations,
                "startsAt": rfc3339(delivery.starts_at),
                "endsAt": _ends(delivery),
                "generatorURL": external_url or "",
                "fingerprint": fingerprint(labels),
            }
        ],
    }


def _ends(delivery: Delivery) -> str:
    """Alertmanager's webhook shows a firing alert's end as the zero time, as here."""
    ends_at = delivery.ends_at
    return rfc3339(ends_at) if delivery.resolved and ends_at is not None else ZERO_TIME


def group_key(labels: dict[str, str]) -> str:
    """``{}:{alertname="x", target="y"}``: the root route, grouped by all labels."""
    pairs = ", ".join(f"{name}={json.dumps(labels[name])}" for name in sorted(labels))
    return "{}:{" + pairs + "}"
