"""``expect:`` against llama.cpp's real answers: an answer cut at ``max_tokens`` says
``finish_reason: length``; the model it names is the name asked, whatever it is (it serves
its one model under any name, and names the model file when none is asked), so a ``model``
check catches a router sending the request elsewhere, not llama.cpp itself."""

from __future__ import annotations

import pytest

from app.probe.answercheck import Expect
from app.probe.run import probe_run
from app.probe.sample import Status
from app.probe.spec import Kind, ProbeSpec
from tests.real.llama import MODEL, LlamaServer, chat_body, prompt

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]


def spec(server: LlamaServer, *, stream: bool, expect: Expect) -> ProbeSpec:
    body = chat_body(prompt(8), 6, stream=stream) | {"model": "tiny"}
    return ProbeSpec(url=server.chat_url, kind=Kind.OPENAI, method="POST", body=body, expect=expect)


async def test_an_answer_cut_at_max_tokens_fails_a_stop_only_check(llama: LlamaServer) -> None:
    expect = Expect(non_empty=True, finish_reason=("stop",))
    (sample,) = await probe_run(spec(llama, stream=True, expect=expect), 1)
    assert sample.status is Status.INVALID_ANSWER
    assert sample.error == "finish_reason 'length', expected [stop]"


async def test_a_stream_names_the_model_asked_and_a_check_for_another_fails(
    llama: LlamaServer,
) -> None:
    (right,) = await probe_run(spec(llama, stream=True, expect=Expect(model="tiny")), 1)
    assert right.status is Status.OK, right.error
    (wrong,) = await probe_run(spec(llama, stream=True, expect=Expect(model="gpt-4o")), 1)
    assert wrong.status is Status.INVALID_ANSWER
    assert wrong.error == "model 'tiny' answered, 'gpt-4o' asked"


async def test_without_a_model_asked_a_stream_names_the_model_file(llama: LlamaServer) -> None:
    body = chat_body(prompt(8), 6, stream=True)
    probe_spec = ProbeSpec(
        url=llama.chat_url, kind=Kind.OPENAI, method="POST", body=body, expect=Expect(model="x")
    )
    (sample,) = await probe_run(probe_spec, 1)
    assert sample.error == f"model '{MODEL}' answered, 'x' asked"


async def test_a_whole_answer_passes_every_check_it_meets(llama: LlamaServer) -> None:
    expect = Expect(
        status=(200,),
        non_empty=True,
        model="tiny",
        finish_reason=("length",),
        min_output_tokens=6,
        regex=r"\w",
    )
    samples = await probe_run(spec(llama, stream=False, expect=expect), 2)
    assert [s.status for s in samples] == [Status.OK, Status.OK], [s.error for s in samples]
    assert samples[0].tokens.completion == 6
