"""`phasewatch probe`: one run against one endpoint, shown as a table or JSON.

Its exit status is the run's verdict, as `curl -f`'s is a request's: 0 when some sample
succeeded, 1 when none did, 2 when the command line cannot be run (nothing was sent), 130
when Ctrl-C cut it short (what was taken is still shown).
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import sys
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.text import Text

from app.analysis.summary import summarize
from app.cli.common import excerpt
from app.envvars import UnsetVariable, expand
from app.probe.headername import HEADER_NAME_PROBLEM, is_header_name
from app.probe.redact import CONTROL_CHARACTER_PROBLEM, has_control_character
from app.probe.sample import Sample, Status
from app.probe.spec import Kind, ProbeSpec

NO_SAMPLE_SUCCEEDED = 1
INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command Ctrl-C ended
SCHEMES = ("http", "https")
# The minimal request of a provider kind without --body: one short user message, streamed,
# its answer capped (Anthropic requires max_tokens; a bounded answer keeps every sample
# the same length and the probe cheap). Counting runs past the cap on a model that obeys.
DEFAULT_MODELS = {Kind.OPENAI: "gpt-4o-mini", Kind.ANTHROPIC: "claude-haiku-4-5"}
DEFAULT_PROMPT = "Count from 1 to 100."
DEFAULT_MAX_TOKENS = 32
ANTHROPIC_VERSION = "2023-06-01"  # the Messages API refuses a request without one
ERROR_EXCERPT_CHARS = 100

DEMO_BODY = {
    "model": "sim-1",
    "stream": True,
    "messages": [{"role": "user", "content": "Translate: 안녕하세요"}],
}


def parse_header(raw: str) -> tuple[str, str]:
    name, sep, value = raw.partition(":")
    name = name.strip()
    if not sep or not name:
        raise typer.BadParameter(f"{raw!r} is not 'Name: value'", param_hint="--header")
    if not is_header_name(name):
        raise typer.BadParameter(f"{name!r} {HEADER_NAME_PROBLEM}", param_hint="--header")
    try:
        value = expand(value.strip(), os.environ)
    except UnsetVariable as exc:
        raise typer.BadParameter(str(exc), param_hint="--header") from None
    if has_control_character(value):
        raise typer.BadParameter(f"{name}: {CONTROL_CHARACTER_PROBLEM}", param_hint="--header")
    return name, value


def parse_body(raw: str | None) -> Any:
    if raw is None:
        return None
    text = raw
    if raw.startswith("@"):
        try:
            text = Path(raw[1:]).read_text()
        except OSError as exc:
            raise typer.BadParameter(
                f"cannot read {raw[1:]}: {exc.strerror}", param_hint="--body"
            ) from exc
    try:
        return json.loads(text)
    except ValueError as exc:
        raise typer.BadParameter(f"not JSON: {exc}", param_hint="--body") from exc


def parse_url(raw: str) -> str:
    """``raw`` if the probe can send to it: http or https, with a host."""
    import httpx  # the HTTP stack only for the command that sends: not for whatif's start

    try:
        url = httpx.URL(raw)
    except httpx.InvalidURL as exc:
        raise typer.BadParameter(str(exc), param_hint="URL") from None
    if not url.scheme:
        raise typer.BadParameter("no scheme: start it with http:// or https://", param_hint="URL")
    if url.scheme not in SCHEMES:
        problem = f"unsupported scheme {url.scheme!r}: http:// or https:// only"
        raise typer.BadParameter(problem, param_hint="URL")
    if not url.host:
        raise typer.BadParameter("no host", param_hint="URL")
    return raw


def parse_cacert(path: Path | None) -> bool | str:
    """The CA bundle's path once it is known to load (the probe loads it again, cached)."""
    if path is None:
        return True
    try:
        ssl.create_default_context(cafile=str(path))
    except ssl.SSLError as exc:  # an OSError too: first
        problem = f"{path} holds no CA certificate in PEM form ({exc.reason or exc})"
        raise typer.BadParameter(problem, param_hint="--cacert") from None
    except OSError as exc:
        problem = f"cannot read {path}: {exc.strerror or exc}"
        raise typer.BadParameter(problem, param_hint="--cacert") from None
    return str(path)


def minimal_body(
    kind: Kind, model: str | None, prompt: str | None, max_tokens: int | None
) -> dict[str, Any]:
    """One streamed user message: these fields mean the same to both providers."""
    return {
        "model": model or DEFAULT_MODELS[kind],
        "max_tokens": max_tokens or DEFAULT_MAX_TOKENS,
        "stream": True,
        "messages": [{"role": "user", "content": prompt or DEFAULT_PROMPT}],
    }


def probe(
    url: Annotated[str | None, typer.Argument(help="Endpoint to probe.")] = None,
    kind: Annotated[Kind, typer.Option(help="How to read the answer.")] = Kind.HTTP,
    samples: Annotated[int, typer.Option(min=1, max=100_000, help="Requests in the run.")] = 20,
    deadline_ms: Annotated[
        float | None, typer.Option(min=1, help="Client deadline; later is censored.")
    ] = None,
    timeout: Annotated[float, typer.Option(min=0.1, help="Hard timeout, seconds.")] = 60.0,
    header: Annotated[
        list[str] | None, typer.Option(help="'Name: value', repeatable; ${ENV} expands.")
    ] = None,
    body: Annotated[str | None, typer.Option(help="JSON request body, or @file.")] = None,
    model: Annotated[
        str | None,
        typer.Option(help="Minimal body: model; default gpt-4o-mini or claude-haiku-4-5."),
    ] = None,
    prompt: Annotated[
        str | None,
        typer.Option(help=f"Minimal body: the user message; default {DEFAULT_PROMPT!r}."),
    ] = None,
    max_tokens: Annotated[
        int | None,
        typer.Option(min=1, help=f"Minimal body: cap on the answer; default {DEFAULT_MAX_TOKENS}."),
    ] = None,
    method: Annotated[str | None, typer.Option(help="Default: POST with a body, else GET.")] = None,
    spacing: Annotated[float, typer.Option(min=0, help="Seconds between requests.")] = 0.0,
    http2: Annotated[bool, typer.Option(help="Offer HTTP/2 (over TLS).")] = False,
    cacert: Annotated[Path | None, typer.Option(help="CA bundle to verify TLS with.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    demo: Annotated[bool, typer.Option(help="Probe the built-in simulated endpoint.")] = False,
) -> None:
    """Probe an endpoint N times and show where the time goes.

    Without --body, --kind openai or anthropic posts a minimal streaming body: --model,
    one user message (--prompt) and max_tokens (--max-tokens); anthropic also gets an
    anthropic-version header.

    Exit status: 0 when some sample succeeded (answered within the deadline, HTTP status
    below 400), 1 when none did, 2 for a usage or configuration error (nothing was sent),
    130 when Ctrl-C cut the run short (the samples taken are shown, marked interrupted).
    """
    if (url is None) == (not demo):
        raise typer.BadParameter("give a URL, or --demo (not both)")
    target = None if url is None else parse_url(url)
    headers = dict(parse_header(h) for h in header or [])
    spec_body = parse_body(body)
    verify = parse_cacert(cacert)
    given = {"--model": model, "--prompt": prompt, "--max-tokens": max_tokens}
    if _wants_minimal_body(kind, spec_body, demo, given):
        spec_body = minimal_body(kind, model, prompt, max_tokens)
        if kind is Kind.ANTHROPIC and "anthropic-version" not in map(str.lower, headers):
            headers["anthropic-version"] = ANTHROPIC_VERSION
    with _endpoint(target, demo) as (target_url, demo_kind):
        spec = ProbeSpec(
            url=target_url,
            kind=demo_kind or kind,
            method=method or ("POST" if spec_body is not None or demo else "GET"),
            headers=headers,
            body=DEMO_BODY if demo and spec_body is None else spec_body,
            deadline_ms=deadline_ms,
            timeout_s=timeout,
            http2=http2,
            verify=verify,
        )
        results, interrupted = _run_with_progress(spec, samples, spacing, quiet=as_json)
    _report(results, as_json, None if not interrupted else samples)
    if interrupted:
        raise typer.Exit(INTERRUPTED)
    _verdict(results)


def _wants_minimal_body(kind: Kind, body: Any, demo: bool, given: Mapping[str, object]) -> bool:
    """A provider kind without a body gets the minimal one; elsewhere its options are
    refused, not ignored (a --model that changed nothing would be a quiet surprise)."""
    wanted = kind is not Kind.HTTP and body is None and not demo
    for flag, value in given.items():
        if not wanted and value is not None:
            problem = "only for the minimal body, sent by --kind openai|anthropic without --body"
            raise typer.BadParameter(problem, param_hint=flag)
    return wanted


@contextmanager
def _endpoint(url: str | None, demo: bool) -> Iterator[tuple[str, Kind | None]]:
    if not demo:
        assert url is not None
        yield url, None
        return
    from app.demo.sim.app import SimConfig
    from app.demo.sim.server import SimServer

    config = SimConfig(one_way_ms=50, queue_median_ms=120, prefill_ms=20, tokens=20)
    with SimServer(config) as server:
        yield f"{server.url}/v1/chat/completions", Kind.OPENAI


def _run_with_progress(
    spec: ProbeSpec, samples: int, spacing: float, quiet: bool
) -> tuple[list[Sample], bool]:
    """The samples taken, and whether Ctrl-C cut the run short (those taken are kept)."""
    # Start-up's objects (modules, their caches, the command line) live for the process.
    # Frozen, a full collection no longer walks them: walking them could fall inside the
    # first sample and hold its cut that long past --deadline-ms (bench.first_deadline).
    from app.probe.run import probe_run  # imported before the freeze, so frozen with the rest
    from app.runtime.collector import frozen

    stderr = Console(stderr=True)
    columns = (TextColumn("probing"), BarColumn(), MofNCompleteColumn())
    hidden = quiet or not stderr.is_terminal
    taken: list[Sample] = []

    def took(sample: Sample) -> None:
        taken.append(sample)
        progress.advance(task)

    with frozen(), Progress(*columns, console=stderr, transient=True, disable=hidden) as progress:
        task = progress.add_task("probe", total=samples)
        try:
            return asyncio.run(probe_run(spec, samples, spacing_s=spacing, on_sample=took)), False
        except KeyboardInterrupt:
            return taken, True


def _report(results: list[Sample], as_json: bool, asked: int | None = None) -> None:
    """``asked``: the run was interrupted before its ``asked`` samples; said so."""
    summary = summarize(results)
    if as_json:
        document = {"samples": [s.to_json() for s in results], "summary": summary.to_json()}
        if asked is not None:
            document["interrupted"] = {"taken": len(results), "asked": asked}
        sys.stdout.write(json.dumps(document) + "\n")
        return
    from app.cli.report import print_summary

    console = Console()
    _print_errors(console, results)
    unsplit = {name for s in results for name in s.unsplit}
    if asked is not None:
        console.print(f"[yellow]interrupted: {len(results)} of {asked} samples taken[/yellow]")
    if results:
        print_summary(console, summary, unsplit, len(results))


def _print_errors(console: Console, results: list[Sample]) -> None:
    """One line per failed sample: an error page is many lines of HTML, once per sample."""
    cut = False
    for sample in results:
        if sample.error:
            line = excerpt(sample.error, ERROR_EXCERPT_CHARS)
            cut = cut or line != excerpt(sample.error, len(sample.error))
            label = Text(f"#{sample.index} {sample.status.value}", style="red")
            # A Text, not markup: the server's words may hold square brackets.
            console.print(Text.assemble(label, ": ", line), soft_wrap=True)
    if cut:
        note = f"(errors cut to {ERROR_EXCERPT_CHARS} characters; --json has each whole)"
        console.print(note, soft_wrap=True)


def _verdict(results: list[Sample]) -> None:
    """Exit 1 when no sample succeeded, saying how each ended."""
    if any(sample.status is Status.OK for sample in results):
        return
    ended = Counter(sample.status.value for sample in results)
    how = ", ".join(f"{count} {status}" for status, count in sorted(ended.items()))
    sys.stderr.write(f"phasewatch: no sample of {len(results)} succeeded ({how})\n")
    raise typer.Exit(NO_SAMPLE_SUCCEEDED)
