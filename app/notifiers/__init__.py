"""Notifiers: one module per kind, a dict as the registry.

The targets file defines them by name::

    notifiers:
      ops-hook:
        type: webhook
        url: https://ops.example/hook
        headers: {Authorization: "Bearer ${HOOK_TOKEN}"}
      chat: {type: slack, url: "${SLACK_WEBHOOK_URL}"}
      am: {type: alertmanager, url: "http://127.0.0.1:9093"}
      pager: {type: pagerduty, routing_key: "${PAGERDUTY_ROUTING_KEY}"}
      mail: {type: email, host: smtp.example.com, sender: pw@example.com, to: [ops@example.com]}

and a target lists the names it uses (``notifiers: [chat]``; none listed = all).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Protocol, get_args

from pydantic import Discriminator, Tag

from app.notifiers.alertmanager import Alertmanager
from app.notifiers.base import Delivery, Notifier, TransportError
from app.notifiers.email import Email
from app.notifiers.pagerduty import PagerDuty
from app.notifiers.slack import Slack
from app.notifiers.webhook import Webhook


def _kind_of(notifier: type[Notifier[Any]]) -> str:
    """The ``type:`` a notifier's config takes: the one literal of its ``type`` field."""
    (kind,) = get_args(notifier.config_model.model_fields["type"].annotation)
    return str(kind)


# The registry, and the one place a notifier is named: the config union below is built from it.
KINDS: dict[str, type[Notifier[Any]]] = {
    _kind_of(notifier): notifier for notifier in (Webhook, Slack, Alertmanager, PagerDuty, Email)
}


def _kind(value: Any) -> Any:
    return value.get("type") if isinstance(value, dict) else getattr(value, "type", None)


def _config_union() -> Any:
    """Every kind's config, told apart by ``type`` (one error naming the kinds otherwise)."""
    members = [Annotated[kind.config_model, Tag(name)] for name, kind in KINDS.items()]
    return Annotated[
        functools.reduce(operator.or_, members),
        Discriminator(
            _kind,
            custom_error_type="notifier_type",
            custom_error_message=f"type must be one of: {', '.join(KINDS)}",
        ),
    ]


class NotifierSettings(Protocol):
    """What the code reads of any notifier's config; pydantic validates the real union."""

    @property
    def type(self) -> str: ...


if TYPE_CHECKING:
    NotifierConfig = NotifierSettings
else:
    NotifierConfig = _config_union()

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
