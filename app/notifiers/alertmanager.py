"""Alertmanager push: ``POST {url}/api/v2/alerts`` with one postable alert.

Alertmanager deduplicates, groups, silences and routes by ``labels``, so they are the
alert's stable identity and never carry a number; numbers go in ``annotations``.
A firing alert is sent with ``endsAt`` = its payload's ``ends_at`` (now + 4 × the
target's interval) and re-sent on every refresh: if phasewatch stops, Alertmanager
resolves the alert by itself soon after. A resolved alert is sent with ``endsAt`` = when
it resolved, which Alertmanager takes as resolved.

A repeat is harmless: Alertmanager merges alerts with the same labels (and ``startsAt``) into
one, and notifies per its group's intervals, not per POST. So the idempotency key goes only
in the header; a postable alert has no field for it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.notifiers import http
from app.notifiers.base import BasicAuth, Delivery, Notifier, Secret, SecretUrl, rfc3339
from app.probe.headername import HeaderName


class AlertmanagerConfig(BaseModel):
    # Errors never echo what was given: it may be a secret.
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    type: Literal["alertmanager"] = Field(description="The notifier kind.")
    url: SecretUrl = Field(description="Base URL; alerts go to its /api/v2/alerts.")
    basic_auth: BasicAuth | None = Field(None, description="For one behind basic auth.")
    headers: dict[HeaderName, Secret] = Field(
        default_factory=dict, description="Extra request headers; `${ENV}` expands."
    )
    timeout: float = Field(10.0, gt=0, le=120, description="Seconds for the whole exchange.")
    external_url: str | None = Field(
        None, pattern=r"^https?://", description="phasewatch's own address, for links back."
    )


class Alertmanager(Notifier[AlertmanagerConfig]):
    refreshes = True

    async def notify(self, delivery: Delivery) -> None:
        config = self.config
        auth = config.basic_auth
        endpoint = http.Endpoint(
            url=config.url.get_secret_value().rstrip("/") + "/api/v2/alerts",
            timeout_s=config.timeout,
            headers={name: value.get_secret_value() for name, value in config.headers.items()},
            auth=(auth.username, auth.password.get_secret_value()) if auth else None,
        )
        body = [postable(delivery, config.external_url)]
        await http.post_json(endpoint, body, delivery.idempotency_key)


def postable(delivery: Delivery, external_url: str | None = None) -> dict[str, Any]:
    """A ``postableAlert`` of Alertmanager's API v2."""
    alert: dict[str, Any] = {
        "labels": delivery.labels,
        "annotations": delivery.annotations,
        "startsAt": rfc3339(delivery.starts_at),
    }
    ends_at = delivery.ends_at
    if ends_at is not None:
        alert["endsAt"] = rfc3339(ends_at)
    if external_url:
        alert["generatorURL"] = external_url
    return alert
