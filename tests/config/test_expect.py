"""A target's ``expect:`` block: each field's mistakes name the file, line, target, field and
reason; a good block becomes the probe's ``Expect``."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.config import ConfigError, load_targets
from app.probe.answercheck import Expect

HEAD = "targets:\n  - name: chat\n    kind: openai\n    url: http://x/v1/chat/completions\n"
BODY = "    body: {model: m1, stream: true, messages: []}\n"


def problems(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "phasewatch.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_targets(path, {})
    return [problem.replace(f"{tmp_path}/", "") for problem in caught.value.problems]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            HEAD + "    expect:\n      status: [200, 503]\n",
            "phasewatch.yaml:6: targets[chat].expect.status.1: Input should be less than or"
            " equal to 399",
        ),
        (
            HEAD + "    expect:\n      status: []\n",
            "phasewatch.yaml:6: targets[chat].expect.status: list at least one",
        ),
        (
            HEAD + "    expect:\n      non_empty: maybe\n",
            "phasewatch.yaml:6: targets[chat].expect.non_empty: Input should be a valid boolean",
        ),
        (
            HEAD + "    expect:\n      model: true\n",
            "phasewatch.yaml:6: targets[chat].expect.model: true takes the body's model, and the"
            " body names none",
        ),
        (
            HEAD + "    expect:\n      finish_reason: stop\n",
            "phasewatch.yaml:6: targets[chat].expect.finish_reason: Input should be a valid list",
        ),
        (
            HEAD + "    expect:\n      min_output_tokens: 0\n",
            "phasewatch.yaml:6: targets[chat].expect.min_output_tokens: Input should be greater"
            " than or equal to 1",
        ),
        (
            HEAD + "    expect:\n      regex: '(unclosed'\n",
            "phasewatch.yaml:6: targets[chat].expect.regex: not a regular expression: missing ),"
            " unterminated subpattern",
        ),
        (
            HEAD + "    expect:\n      json_path: answer\n",
            "phasewatch.yaml:6: targets[chat].expect.json_path: a JSON path starts with $",
        ),
        (
            HEAD + "    expect:\n      json_path: '$.a..b'\n",
            "phasewatch.yaml:6: targets[chat].expect.json_path: cannot read the JSON path from"
            " character 4 on",
        ),
        (
            HEAD + "    expect:\n      json_equals: 3\n",
            "phasewatch.yaml:5: targets[chat].expect: json_equals needs a json_path",
        ),
        (
            HEAD + "    expect:\n      finsh_reason: [stop]\n",
            "phasewatch.yaml:6: targets[chat].expect.finsh_reason: unknown field; did you mean"
            " 'finish_reason'?",
        ),
        (
            "targets:\n  - name: page\n    url: http://x/\n    expect:\n      model: m1\n",
            "phasewatch.yaml:5: targets[page].expect.model: an http target's answer has no model;"
            " openai and anthropic ones do",
        ),
        (
            "targets:\n  - name: page\n    url: http://x/\n    expect:\n"
            "      non_empty: true\n      finish_reason: [stop]\n",
            "phasewatch.yaml:6: targets[page].expect.finish_reason: an http target's answer has"
            " no finish_reason",
        ),
        (
            "targets:\n  - name: page\n    url: http://x/\n    expect:\n"
            "      min_output_tokens: 3\n",
            "phasewatch.yaml:5: targets[page].expect.min_output_tokens: an http target's answer"
            " has no min_output_tokens",
        ),
    ],
)
def test_each_expect_mistake_names_file_line_target_field_and_reason(
    tmp_path: Path, text: str, expected: str
) -> None:
    found = problems(tmp_path, text)
    assert any(problem.startswith(expected) for problem in found), found


def test_a_full_expect_block_becomes_the_probes_expect(tmp_path: Path) -> None:
    path = tmp_path / "phasewatch.yaml"
    path.write_text(
        HEAD + BODY + "    expect:\n      status: [200]\n      non_empty: true\n"
        "      model: true\n      finish_reason: [stop, length]\n      min_output_tokens: 2\n"
        "      regex: '\\d+'\n      json_path: \"$.items[0]['id']\"\n      json_equals: 7\n"
    )
    (target,) = load_targets(path, {}).targets
    assert target.probe_spec().expect == Expect(
        status=(200,),
        non_empty=True,
        model="m1",
        finish_reason=("stop", "length"),
        min_output_tokens=2,
        regex=r"\d+",
        json_path="$.items[0]['id']",
        json_equals=7,
    )


def test_no_expect_block_asks_nothing_and_a_named_model_needs_no_body(tmp_path: Path) -> None:
    path = tmp_path / "phasewatch.yaml"
    path.write_text(
        HEAD + "  - name: other\n    kind: anthropic\n    url: http://y/\n"
        "    expect: {model: claude-x}\n"
    )
    chat, other = load_targets(path, {}).targets
    assert chat.probe_spec().expect is None
    assert other.probe_spec().expect == Expect(model="claude-x")
