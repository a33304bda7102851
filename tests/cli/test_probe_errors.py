"""`phasewatch probe`'s errors, each one line, from a real process: a bad --cacert or an
unsupported URL is refused before any request (exit 2); a sample's error is one line with
a short excerpt of what the server said, and --json has the whole of it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.cliserver import probe, response, serving

pytestmark = [pytest.mark.process, pytest.mark.timeout(120)]

# An error page as nginx sends one: many lines, with a word past any one-line excerpt.
PAGE = (
    b"<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n"
    b"<center><h1>404 Not Found</h1></center>\r\n"
    + b"<!-- a comment to pad the page -->\r\n" * 3
    + b"<p>DEEPWORD</p>\r\n<hr><center>nginx/1.22.1</center>\r\n</body>\r\n</html>\r\n"
)


def assert_refused_in_one_line(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("phasewatch: error: "), done.stderr
    for word in words:
        assert word in done.stderr


@pytest.fixture
def not_a_certificate(tmp_path: Path) -> Path:
    path = tmp_path / "notes.txt"
    path.write_text("not a certificate\n")
    return path


@pytest.mark.parametrize(
    ("cacert", "words"),
    [
        ("/nonexistent/ca.pem", ("--cacert", "/nonexistent/ca.pem", "No such file")),
        ("/", ("--cacert", "Is a directory")),
        ("NOT_A_CERTIFICATE", ("--cacert", "notes.txt", "no CA certificate")),
    ],
)
def test_a_cacert_that_cannot_be_used_is_one_line_not_a_traceback(
    cacert: str, words: tuple[str, ...], not_a_certificate: Path
) -> None:
    cacert = str(not_a_certificate) if cacert == "NOT_A_CERTIFICATE" else cacert
    with serving() as (recorder, url):
        done = probe(url.replace("http:", "https:"), "--cacert", cacert, "--samples", "1")
    assert_refused_in_one_line(done, *words)
    assert "Traceback" not in done.stderr
    assert recorder.received == []


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("ftp://127.0.0.1/file", ("URL", "'ftp'", "http:// or https://")),
        ("file:///etc/passwd", ("URL", "'file'", "http:// or https://")),
        ("example.com/v1", ("URL", "no scheme", "http:// or https://")),
        ("http:///v1", ("URL", "no host")),
        ("http://[::1/", ("URL", "Invalid")),
    ],
)
def test_a_url_the_probe_cannot_send_to_is_refused_in_one_line(
    url: str, words: tuple[str, ...]
) -> None:
    assert_refused_in_one_line(probe(url, "--samples", "2"), *words)


def test_each_error_page_is_one_line_per_sample_and_json_has_it_whole() -> None:
    with serving(response(b"404 Not Found", b"text/html", PAGE)) as (_, url):
        text = probe(url, "--samples", "3")
        document = probe(url, "--samples", "1", "--json")
    errors = [line for line in text.stdout.splitlines() if line.startswith("#")]
    assert [line.split(":")[0] for line in errors] == [f"#{i} http_error" for i in range(3)]
    assert text.stdout.count("404 Not Found: <html> <head><title>") == 3
    assert "DEEPWORD" not in text.stdout and "nginx/1.22.1" not in text.stdout
    assert all(len(line) <= 120 for line in errors)
    assert "--json" in text.stdout  # says where the rest is
    (sample,) = json.loads(document.stdout)["samples"]
    assert "DEEPWORD" in sample["error"] and "nginx/1.22.1" in sample["error"]


def test_an_error_text_cannot_restyle_or_drive_the_terminal() -> None:
    # Square brackets are rich markup, ESC starts a terminal control sequence.
    body = b'{"error": {"message": "bad [/red] [bold]request\\u001b[2J\\u001b[1A"}}'
    with serving(response(b"400 Bad Request", b"application/json", body)) as (_, url):
        done = probe(url, "--samples", "1")
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("#0")]
    assert line == "#0 http_error: 400 Bad Request: bad [/red] [bold]request [2J [1A"
    assert "\x1b" not in done.stdout
