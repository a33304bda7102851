"""The targets file's ``vantages:``: the agents allowed to report, each with its token."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SecretStr

from app.envvars import expand_field

VantageName = Annotated[
    str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:/-]*$")
]


class VantageAccess(BaseModel):
    """One agent allowed to report: its token, a secret (``${ENV}`` expands)."""

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    token: Annotated[SecretStr, BeforeValidator(expand_field)] = Field(
        min_length=16, description="The agent's bearer token; `${ENV}` expands."
    )
