"""`phasewatch probe`'s exit status, from a real process: 0 when some sample succeeded, 1 when
none did, 2 for a usage or configuration error — what `curl -f`, blackbox's `probe_success`
and a CI script's `phasewatch probe URL || page` expect."""

from __future__ import annotations

import json
import os
import re
import signal
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
import trustme

from tests.cliserver import OK, ROOT, probe, response, serving
from tests.helpers import eventually

pytestmark = [pytest.mark.process, pytest.mark.timeout(120)]

NOT_FOUND = response(b"404 Not Found", b"text/html", b"<html><h1>404 Not Found</h1></html>")
HTML_PAGE = response(b"200 OK", b"text/html", b"<html><body>a web page</body></html>")


def test_a_run_whose_every_connection_is_refused_exits_1(refused_port: int) -> None:
    done = probe(f"http://127.0.0.1:{refused_port}/", "--samples", "2")
    assert done.returncode == 1, done.stderr
    assert "#0 error" in done.stdout and "#1 error" in done.stdout
    assert done.stderr == "phasewatch: no sample of 2 succeeded (2 error)\n"


def test_a_run_of_404s_exits_1() -> None:
    with serving(NOT_FOUND) as (_, url):
        done = probe(url, "--samples", "3")
    assert done.returncode == 1, done.stderr
    assert done.stderr == "phasewatch: no sample of 3 succeeded (3 http_error)\n"


def test_a_run_against_the_wrong_kind_of_endpoint_exits_1() -> None:
    with serving(HTML_PAGE) as (_, url):
        done = probe(url, "--kind", "openai", "--samples", "2", "--json")
    assert done.returncode == 1, done.stderr
    assert {s["status"] for s in json.loads(done.stdout)["samples"]} == {"error"}


def test_a_certificate_nobody_vouches_for_exits_1_and_its_ca_exits_0(tmp_path: Path) -> None:
    ca = trustme.CA()
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(tls)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    with serving(OK, tls=tls) as (_, url):
        untrusted = probe(url, "--samples", "2")
        trusted = probe(url, "--samples", "2", "--cacert", str(ca_file))
    assert untrusted.returncode == 1, untrusted.stderr
    assert "CERTIFICATE_VERIFY_FAILED" in untrusted.stdout
    assert trusted.returncode == 0, trusted.stderr + trusted.stdout


def test_one_answer_among_failures_is_a_success_exit_0() -> None:
    with serving(NOT_FOUND, NOT_FOUND, OK) as (_, url):
        done = probe(url, "--samples", "3", "--json")
    assert done.returncode == 0, done.stderr
    statuses = [s["status"] for s in json.loads(done.stdout)["samples"]]
    assert statuses == ["http_error", "http_error", "ok"]
    assert done.stderr == ""


def test_a_usage_error_exits_2_before_any_request() -> None:
    with serving(OK) as (recorder, url):
        done = probe(url, "--samples", "0")
    assert done.returncode == 2
    assert recorder.received == []


def test_the_help_says_what_each_exit_status_means() -> None:
    done = probe("--help")
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    assert "Exit status: 0 when some sample succeeded" in text
    assert "1 when none did" in text and "2 for a usage or configuration error" in text


@pytest.mark.parametrize("as_json", [False, True], ids=["table", "json"])
def test_ctrl_c_prints_the_samples_taken_marked_interrupted_and_exits_130(as_json: bool) -> None:
    command = [sys.executable, "-m", "app", "probe", "--samples", "400", "--spacing", "0.05"]
    with serving(*([OK] * 400)) as (recorder, url):
        process = subprocess.Popen(
            [*command, url, *(["--json"] if as_json else [])],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=os.environ | {"PYTHONPATH": str(ROOT)},
        )
        eventually(lambda: len(recorder.received) >= 5, 30, "some samples taken")
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    assert process.returncode == 130, err
    assert "Traceback" not in err and "CancelledError" not in err
    if as_json:
        document = json.loads(out)
        taken = document["interrupted"]["taken"]
        assert document["interrupted"]["asked"] == 400 and len(document["samples"]) == taken
    else:
        (taken,) = [int(n) for n in re.findall(r"interrupted: (\d+) of 400 samples taken", out)]
        assert "dominant phase" in out
    # Every answered request is a sample taken, but the one in flight at the interrupt.
    assert len(recorder.received) - 1 <= taken <= len(recorder.received) < 400
