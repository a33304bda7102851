"""Notifiers are registered in one place: ``KINDS`` names each kind by its config's ``type``
literal, and the targets file's union of notifier configs is built from it."""

from __future__ import annotations

from typing import Any, get_args

from app.config import TargetsFile
from app.notifiers import KINDS, Delivery, Notifier
from app.notifiers.webhook import WebhookConfig


def union_members() -> set[Any]:
    """The models of ``dict[NotifierName, Annotated[A | B | …, Discriminator]]``."""
    _, config = get_args(TargetsFile.model_fields["notifiers"].annotation)
    union, _discriminator = get_args(config)
    return {get_args(tagged)[0] for tagged in get_args(union)}


def test_every_kind_is_named_by_its_configs_type_and_is_in_the_targets_file_union() -> None:
    assert union_members() == {kind.config_model for kind in KINDS.values()}
    for name, kind in KINDS.items():
        assert get_args(kind.config_model.model_fields["type"].annotation) == (name,)


def test_a_notifier_knows_its_config_model_from_how_it_is_declared() -> None:
    class Echo(Notifier[WebhookConfig]):
        async def notify(self, delivery: Delivery) -> None:
            return None

    assert Echo.config_model is WebhookConfig
