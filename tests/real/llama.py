"""llama.cpp's OpenAI-compatible server (llama-cpp-python) on loopback, and its own account
of every request: the ``llama_perf_context_print`` block it writes to stderr, one per
request, in the order they finish (it serves one at a time).

The server runs under ``PHASEWATCH_LLM_PYTHON`` (default: this interpreter) with
``llama_cpp.server`` importable there; ``.ci/test`` installs the wheel from
``$PHASEWATCH_LLM_DIR/wheels`` (default ``../shared/llm``) into the venv. The model is
``PHASEWATCH_LLM_MODEL`` (default ``$PHASEWATCH_LLM_DIR/tiny-random-llama.gguf``). See
../shared/llm/README.md for how the server behaves.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.helpers import eventually, free_port
from tests.real.parts import ROOT, missing, stop, wait_until_answering

REQUIRE = "PHASEWATCH_REQUIRE_LLM"
SHARED = Path(os.environ.get("PHASEWATCH_LLM_DIR", ROOT.parent / "shared" / "llm"))
MODEL = Path(os.environ.get("PHASEWATCH_LLM_MODEL", SHARED / "tiny-random-llama.gguf"))
# Random weights emit byte tokens, which the server holds back while streaming; banning
# them (and the end-of-sequence token, 2) gives a clean stream exactly max_tokens long.
CLEAN = {str(token): -100 for token in range(259)}
# The drain's one word in the chat template is 14 tokens; the tests' shortest prompt is 34.
DRAIN_TOKENS = 20
WORDS = "alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega".split()

_CACHED = re.compile(r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens")
_PROMPT = re.compile(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")
_EVAL = re.compile(r"\beval time =\s*([\d.]+) ms /\s*(\d+) runs")
_TOTAL = re.compile(r"total time =\s*([\d.]+) ms /\s*(\d+) tokens")


@dataclass(frozen=True)
class Perf:
    """One request as llama.cpp accounts for it (ms)."""

    prompt_tokens: int  # evaluated: the prompt less a cached prefix
    eval_runs: int  # tokens generated after the first
    total_ms: float  # prompt processing and generation, as its own clock saw them
    cached_prefix: int = 0  # prompt tokens it skipped ("prefix-match hit")
    prompt_ms: float = 0.0  # its prompt eval time: the prefill, inside total_ms


def python() -> str:
    return os.environ.get("PHASEWATCH_LLM_PYTHON", sys.executable)


def prompt(words: int, seed: int = 0) -> str:
    """A prompt of ``words`` words (three tokens each, about)."""
    return " ".join(WORDS[(seed + i * 7) % len(WORDS)] for i in range(words))


def chat_body(text: str, max_tokens: int, *, stream: bool) -> dict[str, Any]:
    return {
        "messages": [{"role": "user", "content": text}],
        "max_tokens": max_tokens,
        "stream": stream,
        "logit_bias": CLEAN,
    }


def parse_perf(text: str) -> list[Perf]:
    """Every complete perf block in a stderr log, in order."""
    found: list[Perf] = []
    cached, tokens, runs, prompt_ms = 0, 0, 0, 0.0
    for line in text.splitlines():
        if match := _CACHED.search(line):
            cached = int(match.group(1))
        elif match := _PROMPT.search(line):
            prompt_ms, tokens = float(match.group(1)), int(match.group(2))
        elif match := _EVAL.search(line):
            runs = int(match.group(2))
        elif match := _TOTAL.search(line):
            found.append(Perf(tokens, runs, float(match.group(1)), cached, prompt_ms))
            cached = 0
    return found


@dataclass
class LlamaServer:
    url: str  # http://127.0.0.1:PORT
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def chat_url(self) -> str:
        return f"{self.url}/v1/chat/completions"

    def perf(self) -> list[Perf]:
        return parse_perf(self.log.read_text(errors="replace"))

    def wait_for(self, count: int, timeout_s: float = 30.0) -> list[Perf]:
        """The perf blocks once there are ``count`` (its last one can trail the answer)."""

        def enough() -> list[Perf] | None:
            found = self.perf()
            return found if len(found) >= count else None

        return eventually(enough, timeout_s, f"{count} perf blocks")

    def drain(self, timeout_s: float = 60.0) -> list[Perf]:
        """The perf blocks once every request sent before has finished, a cancelled one the
        server kept working on too. It serves one request at a time, so a one-token answer
        comes back only after them; its own block is the last, told apart by its size. A
        wait for quiet would be a guess: a cancelled 1,900-token prompt took over 1.5 s on a
        busy CI machine and its block landed in the next test's count."""
        body = chat_body("drain", 1, stream=False)
        httpx.post(self.chat_url, json=body, timeout=timeout_s).raise_for_status()

        def drained() -> list[Perf] | None:
            found = self.perf()
            return found if found and _is_drain(found[-1]) else None

        return eventually(drained, timeout_s, "the drain request's perf block")


def _is_drain(perf: Perf) -> bool:
    return perf.eval_runs <= 1 and perf.prompt_tokens + perf.cached_prefix < DRAIN_TOKENS


def check_installed() -> None:
    if not MODEL.exists():
        missing("llama.cpp", REQUIRE, f"no model at {MODEL} (PHASEWATCH_LLM_MODEL)")
    found = subprocess.run(
        [python(), "-c", "import llama_cpp.server"], capture_output=True, timeout=60
    )
    if found.returncode != 0:
        missing(
            "llama.cpp",
            REQUIRE,
            f"{python()} cannot import llama_cpp.server (PHASEWATCH_LLM_PYTHON); "
            f"pip install {SHARED}/wheels/llama_cpp_python-*.whl uvicorn fastapi sse-starlette "
            "starlette-context pydantic-settings (.ci/test does)",
        )


@contextmanager
def running_llama(workdir: Path) -> Iterator[LlamaServer]:
    check_installed()
    port, log = free_port(), workdir / "llama.stderr"
    command = [python(), "-m", "llama_cpp.server", "--model", str(MODEL)]
    command += ["--host", "127.0.0.1", "--port", str(port), "--n_threads", "1"]
    # Room for a prompt whose prefill outlasts a deadline by a wide margin (test_llama).
    command += ["--n_ctx", "8192"]
    # By default a new request interrupts the stream being served (which ends without
    # its last chunk); a serving engine queues it, and that is what a probe should see.
    command += ["--interrupt_requests", "False"]
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=stderr, stdin=subprocess.DEVNULL
        )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_answering(f"{url}/v1/models", process, log)
        yield LlamaServer(url, process, log)
    finally:
        stop(process)
