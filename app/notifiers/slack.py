"""Slack incoming webhook: one readable message per notification.

The URL is the secret (anyone holding it can post), so it comes from the environment:
``url: ${SLACK_WEBHOOK_URL}``. Slack answers 200 ``ok``; 4xx like ``invalid_payload``
or ``no_service`` are permanent, 429 (rate limited) and 5xx are tried again. Slack ignores
``idempotency_key`` (and the header): it is there for a relay that drops repeats.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.notifiers import http
from app.notifiers.base import Delivery, Notifier, SecretUrl, number_text

EMOJI = {"firing": "🔴", "recovering": "🟡", "resolved": "✅", "inactive": "✅"}
TITLE = {"firing": "Firing", "recovering": "Recovering", "resolved": "Resolved"}
_MAX_NUMBERS = 12
_MAX_TEXT = 2900  # Slack refuses a text object over 3000 characters


class SlackConfig(BaseModel):
    # Errors never echo what was given: it may be a secret.
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    type: Literal["slack"] = Field(description="The notifier kind.")
    url: SecretUrl = Field(description="The incoming-webhook URL; `${ENV}` expands.")
    timeout: float = Field(10.0, gt=0, le=120, description="Seconds for the whole exchange.")


class Slack(Notifier[SlackConfig]):
    async def notify(self, delivery: Delivery) -> None:
        url = self.config.url.get_secret_value()
        endpoint = http.Endpoint(url=url, timeout_s=self.config.timeout)
        await http.post_json(endpoint, message(delivery), delivery.idempotency_key)


def message(delivery: Delivery) -> dict[str, Any]:
    emoji = EMOJI.get(delivery.state, "🔔")
    headline = f"{emoji} *{_title(delivery)}*: {_escape(delivery.summary)}"
    fields = [_field(name, value) for name, value in _facts(delivery)]
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": _cut(headline)}},
        {"type": "section", "fields": fields},
    ]
    numbers = _numbers(delivery)
    if numbers:
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": numbers}]})
    fallback = f"{_title(delivery)}: {delivery.summary}"
    return {
        "text": _cut(_escape(fallback)),
        "blocks": blocks,
        "idempotency_key": delivery.idempotency_key,
    }


def _title(delivery: Delivery) -> str:
    if delivery.refresh:
        return "Still firing"
    return TITLE.get(delivery.state, delivery.state.capitalize())


def _facts(delivery: Delivery) -> list[tuple[str, str]]:
    p = delivery.payload
    where = p.get("vantage") or "all vantages"
    facts = [
        ("Target", str(p.get("target", "?"))),
        ("Where", f"{where} ({p.get('scope', '?')})"),
        ("Alert", f"{p.get('alert', '?')} · {p.get('severity', '?')}"),
    ]
    if p.get("from_phase") or p.get("to_phase"):
        facts.append(("Phases", f"{p.get('from_phase') or '?'} → {p.get('to_phase') or '?'}"))
    return facts


def _field(name: str, value: str) -> dict[str, str]:
    return {"type": "mrkdwn", "text": f"*{name}*\n{_escape(value)}"}


def _numbers(delivery: Delivery) -> str:
    items = sorted(delivery.numbers.items())[:_MAX_NUMBERS]
    text = " · ".join(f"{name} {number_text(value)}" for name, value in items)
    return _cut(_escape(text))


def _escape(text: str) -> str:
    """Slack's mrkdwn treats these three as markup."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cut(text: str) -> str:
    return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 1] + "…"
