"""Notifiers: one module per kind, a dict as the registry.

The targets file defines them by name::

    notifiers:
      ops-hook:
        type: webhook
        url: https://ops.example/hook
        headers: {Authorization: "Bearer ${HOOK_TOKEN}"}
      chat: {type: slack, url: "${SLACK_WEBHOOK_URL}"}
      am: {type: alertmanager, url: "http://127.0.0.1:9093"}

and a target lists the names it uses (``notifiers: [chat]``; none listed = all).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from pydantic import Discriminator, Tag

from app.notifiers.alertmanager import Alertmanager, AlertmanagerConfig
from app.notifiers.base import Delivery, Notifier, TransportError
from app.notifiers.slack import Slack, SlackConfig
from app.notifiers.webhook import Webhook, WebhookConfig

KINDS: dict[str, type[Notifier[Any]]] = {
    "webhook": Webhook,
    "slack": Slack,
    "alertmanager": Alertmanager,
}


def _kind(value: Any) -> Any:
    return value.get("type") if isinstance(value, dict) else getattr(value, "type", None)


NotifierConfig = Annotated[
    Annotated[WebhookConfig, Tag("webhook")]
    | Annotated[SlackConfig, Tag("slack")]
    | Annotated[AlertmanagerConfig, Tag("alertmanager")],
    Discriminator(
        _kind,
        custom_error_type="notifier_type",
        custom_error_message=f"type must be one of: {', '.join(KINDS)}",
    ),
]

__all__ = [
    "KINDS",
    "Delivery",
    "Notifier",
    "NotifierConfig",
    "TransportError",
    "build_notifiers",
    "names_for",
]


def build_notifiers(configs: Mapping[str, Any]) -> dict[str, Notifier[Any]]:
    """The notifiers of a targets file (``TargetsFile.notifiers``), by name."""
    return {name: KINDS[config.type](name, config) for name, config in configs.items()}


def names_for(chosen: Sequence[str], defined: Mapping[str, Any]) -> list[str]:
    """The notifiers a target uses: the ones it names, or every one when it names none."""
    return list(chosen) if chosen else list(defined)
