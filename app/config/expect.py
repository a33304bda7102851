"""A target's ``expect:`` block: what a right answer has (``app.probe.answercheck`` judges it)."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from app.probe.answercheck import Expect, parse_path
from app.probe.spec import Kind

# What only an LLM answer has: a model, a finish reason, output tokens.
LLM_ONLY = ("model", "finish_reason", "min_output_tokens")
StatusCode = Annotated[int, Field(ge=100, le=399)]


class ExpectConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    status: list[StatusCode] | None = Field(
        None, description="Statuses a right answer has (≥ 400: always http_error)."
    )
    non_empty: bool = Field(False, description="The answer text is not empty (nor blank).")
    model: bool | str = Field(
        False, description="The model answering is this one; `true`: the body's `model`."
    )
    finish_reason: list[str] | None = Field(
        None, description="Every finish (stop) reason is one of these."
    )
    min_output_tokens: int | None = Field(None, ge=1, description="At least this many.")
    regex: str | None = Field(None, description="Found in the answer text (Python `re`).")
    json_path: str | None = Field(
        None, description="The answer text is JSON with a non-null value here: `$.a[0].b`."
    )
    json_equals: Any = Field(None, description="…and that value equals this.")

    @field_validator("status", "finish_reason")
    @classmethod
    def _not_empty(cls, values: list[Any] | None) -> list[Any] | None:
        if values is not None and not values:
            raise ValueError("list at least one (an empty list would refuse every answer)")
        return values

    @field_validator("regex")
    @classmethod
    def _compiles(cls, pattern: str | None) -> str | None:
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from None
        return pattern

    @field_validator("json_path")
    @classmethod
    def _readable_path(cls, path: str | None) -> str | None:
        if path is not None:
            parse_path(path)  # its ValueError names what is wrong
        return path

    @model_validator(mode="after")
    def _equals_needs_path(self) -> ExpectConfig:
        if self.json_equals is not None and self.json_path is None:
            raise ValueError("json_equals needs a json_path to compare at")
        return self

    def spec(self, body: Any) -> Expect:
        """The probe's ``Expect``; ``model: true`` is the model ``body`` asks for."""
        model: object = self.model
        if model is True:
            model = body.get("model") if isinstance(body, dict) else None
        return Expect(
            status=tuple(self.status or ()),
            non_empty=self.non_empty,
            model=model if isinstance(model, str) else None,
            finish_reason=tuple(self.finish_reason or ()),
            min_output_tokens=self.min_output_tokens,
            regex=self.regex,
            json_path=self.json_path,
            json_equals=self.json_equals,
        )


def kind_problems(
    index: int, kind: Kind, body: Any, expect: ExpectConfig
) -> list[InitErrorDetails]:
    """What ``expect`` asks that a target of ``kind`` sending ``body`` cannot answer."""
    problems = []
    if kind is Kind.HTTP:
        asked = [name for name in LLM_ONLY if name in expect.model_fields_set]
        problems += [
            _problem(
                index, name, "an http target's answer has no {name}; openai and anthropic ones do"
            )
            for name in asked
            if getattr(expect, name) not in (None, False)
        ]
    elif expect.model is True and not (
        isinstance(body, dict) and isinstance(body.get("model"), str)
    ):
        problems.append(
            _problem(index, "model", "true takes the body's model, and the body names none")
        )
    return problems


def _problem(index: int, name: str, template: str) -> InitErrorDetails:
    return InitErrorDetails(
        type=PydanticCustomError("expect_" + name, template, {"name": name}),
        loc=("targets", index, "expect", name),
        input=name,
    )
