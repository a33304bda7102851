"""What a target says about its requests, in the terms of the semantic conventions."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from app.config import Target
from app.probe.spec import Kind

# The API a kind speaks, as ``gen_ai.provider.name``: the conventions' well-known values.
PROVIDERS = {Kind.OPENAI: "openai", Kind.ANTHROPIC: "anthropic"}
DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True, slots=True)
class TargetFacts:
    kind: Kind
    method: str
    scheme: str
    host: str
    port: int
    model: str | None = None  # the body's "model", when it names one

    @property
    def llm(self) -> bool:
        return self.kind in PROVIDERS

    @property
    def provider(self) -> str:
        return PROVIDERS.get(self.kind, self.kind.value)

    @property
    def operation(self) -> str:
        """``gen_ai.operation.name``: both kinds' APIs (chat completions, messages) chat."""
        return "chat"

    @classmethod
    def of(cls, target: Target) -> TargetFacts:
        url = urlsplit(target.url)
        scheme = url.scheme.lower()
        spec = target.probe_spec()
        model = target.body.get("model") if isinstance(target.body, dict) else None
        return cls(
            kind=target.kind,
            method=spec.method,
            scheme=scheme,
            host=url.hostname or "",
            port=url.port or DEFAULT_PORTS.get(scheme, 0),
            model=model if isinstance(model, str) and model else None,
        )
