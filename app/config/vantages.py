"""The targets file's ``vantages:``: the agents allowed to report, each with its token."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, SecretStr

from app.envvars import expand_field, has_reference

TOKEN_MIN_CHARACTERS = 16

VantageName = Annotated[
    str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:/-]*$")
]


def _long_enough(token: SecretStr) -> SecretStr:
    """A token's length is judged once it is expanded: a command that needs no variables
    (backtest, export) keeps ``${NAME}`` as written, which says nothing of the token."""
    value = token.get_secret_value()
    if len(value) < TOKEN_MIN_CHARACTERS and not has_reference(value):
        raise ValueError(f"a token needs at least {TOKEN_MIN_CHARACTERS} characters")
    return token


class VantageAccess(BaseModel):
    """One agent allowed to report: its token, a secret (``${ENV}`` expands)."""

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    token: Annotated[SecretStr, BeforeValidator(expand_field), AfterValidator(_long_enough)] = (
        Field(
            description=f"The agent's bearer token, at least {TOKEN_MIN_CHARACTERS} characters;"
            " `${ENV}` expands."
        )
    )
