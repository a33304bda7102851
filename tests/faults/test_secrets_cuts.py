"""No character pair of a target's header value survives in a sample, wherever a server
puts it: at every offset around every cut the probe makes (the 300-character message of an
error body, the 500-character error text, the 64 KiB the probe keeps of an error body, the
80 characters quoted of a stream's bad data, the 200-character request id) and in every
field a response can fill (error text, request id, Server-Timing names and descriptions).

Real loopback servers (``tests.hostile``) give the answers; ``Sample.to_json`` is checked
whole, as ``phasewatch probe --json`` prints it. tests/faults/test_secrets_served.py follows
the same samples into both databases and every API response that serves them.
"""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, example, given, settings

from app.probe.client import make_client, probe_once
from app.probe.sample import Sample
from tests.faults.plants import FILLER, PLANTS, SECRET, Plant, answering, fillers, leaks, secrets

pytestmark = pytest.mark.timeout(300)


@pytest.mark.parametrize("plant", PLANTS, ids=lambda plant: plant.name)
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(secret=secrets, filler=fillers)
@example(secret=SECRET, filler=FILLER)
@example(secret="ZK-BFGQM", filler="a")
def test_no_two_characters_of_a_secret_survive_any_cut(
    plant: Plant, secret: str, filler: str
) -> None:
    for offset, sample in asyncio.run(sweep(plant, secret, filler)):
        check(plant, secret, offset, sample)


async def sweep(plant: Plant, secret: str, filler: str) -> list[tuple[int, Sample]]:
    """One probe per offset, the secret planted there, through one pooled client."""
    found = []
    async with answering() as (answers, url):
        spec = plant.spec(url, secret)
        async with make_client(spec) as client:
            for offset in plant.offsets(secret):
                answers.planned.append(plant.response(plant.text(secret, offset, filler)))
                found.append((offset, await probe_once(client, spec)))
    return found


def check(plant: Plant, secret: str, offset: int, sample: Sample) -> None:
    document = sample.to_json()
    kept = document[plant.field]
    assert kept, f"{plant.name}: nothing kept in {plant.field}, so nothing was tested"
    leaked = leaks(secret, document)
    assert not leaked, f"{plant.name}, secret at {offset}: {leaked} left in {kept!r}"
    if plant.name == "server-timing name":
        # Lower-cased by the probe, so out of reach of the case-sensitive search above.
        names = {"server-timing:<redacted>", "server-timing:<redacted>x", "server-timing:total"}
        assert set(kept) <= names, kept
