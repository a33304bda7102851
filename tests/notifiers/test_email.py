"""Email against a real SMTP server on loopback (aiosmtpd): STARTTLS with a throw-away CA's
certificate (trustme), AUTH only over TLS, and the server's refusals judged as SMTP means
them."""

from __future__ import annotations

import email
import email.policy
import ssl
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
import trustme
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session
from sqlalchemy.orm import Session as DbSession
from sqlalchemy.orm import sessionmaker

from app.alerts.sender import Sender
from app.alerts.state import State
from app.config import load_targets
from app.config.errors import ConfigError
from app.notifiers.base import Delivery, TransportError
from app.notifiers.email import Email, EmailConfig, body
from tests.alertmanager import Outbox, identity, payload
from tests.helpers import free_port

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]
PASSWORD = "pw-" + uuid.uuid4().hex
AT = datetime(2026, 11, 3, 9, 30, tzinfo=UTC)


@dataclass
class Mailbox:
    """What the server received, and how: whether over TLS, who logged in."""

    messages: list[tuple[Envelope, EmailMessage, bool]] = field(default_factory=list)
    logins: list[str] = field(default_factory=list)
    rcpt_answer: str | None = None  # e.g. "550 no such user"

    async def handle_RCPT(  # noqa: N802 - aiosmtpd's hook name
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: Any
    ) -> str:
        if self.rcpt_answer:
            return self.rcpt_answer
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(  # noqa: N802 - aiosmtpd's hook name
        self, server: SMTP, session: Session, envelope: Envelope
    ) -> str:
        raw = envelope.original_content or b""
        parsed = email.message_from_bytes(raw, policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        self.messages.append((envelope, parsed, session.ssl is not None))
        return "250 Message accepted"

    def authenticate(
        self, server: SMTP, session: Session, envelope: Envelope, mechanism: str, data: Any
    ) -> AuthResult:
        ok = isinstance(data, LoginPassword) and data.password.decode() == PASSWORD
        if ok:
            self.logins.append(data.login.decode())
        return AuthResult(success=ok, handled=False)  # aiosmtpd answers 535 itself


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def ca_file(ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("ca") / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


def serving(mailbox: Mailbox, tls: ssl.SSLContext | None) -> Controller:
    options: dict[str, Any] = {"authenticator": mailbox.authenticate}
    if tls is not None:
        options["tls_context"] = tls
    port = free_port()
    controller = Controller(mailbox, hostname="127.0.0.1", port=port, **options)
    controller.start()
    return controller


@pytest.fixture
def server(ca: trustme.CA) -> Iterator[tuple[Mailbox, int]]:
    """A server that offers STARTTLS (a certificate for 127.0.0.1) and AUTH over it."""
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(tls)
    mailbox = Mailbox()
    controller = serving(mailbox, tls)
    yield mailbox, controller.port
    controller.stop()


@pytest.fixture
def plain_server() -> Iterator[tuple[Mailbox, int]]:
    """A server that offers no STARTTLS."""
    mailbox = Mailbox()
    controller = serving(mailbox, None)
    yield mailbox, controller.port
    controller.stop()


def notifier(port: int, **fields: Any) -> Email:
    config = {"type": "email", "host": "127.0.0.1", "port": port, "sender": "pw@example.com"}
    config |= {"to": ["ops@example.com", "oncall@example.com"], **fields}
    return Email("mail", EmailConfig.model_validate(config))


def firing(state: State = State.FIRING, previous: State = State.PENDING) -> Delivery:
    body = payload(identity(), state, previous, AT, alert_id="8f1c2f44-9a8e-4a55-8d55-0c5b8f3e8a11")
    return Delivery(1, "mail", body, transition_id=7 if state is State.FIRING else 8)


async def test_a_firing_alert_is_one_mail_over_starttls_after_a_login(
    server: tuple[Mailbox, int], ca_file: str
) -> None:
    mailbox, port = server
    delivery = firing()
    await notifier(port, username="pw", password=PASSWORD, verify=ca_file).notify(delivery)
    [(envelope, mail, over_tls)] = mailbox.messages
    assert over_tls and mailbox.logins == ["pw"]
    assert envelope.mail_from == "pw@example.com"
    assert envelope.rcpt_tos == ["ops@example.com", "oncall@example.com"]
    assert mail["Subject"] == f"[phasewatch] Firing: {delivery.summary}"
    assert delivery.summary.startswith("dominant phase moved on translate-prod: generation")
    assert mail["Message-ID"] == f"<{delivery.idempotency_key}@phasewatch>"
    assert mail["References"] == f"<{delivery.alert_key}@phasewatch>"
    text = mail.get_content().replace("\r\n", "\n")  # SMTP's line ends
    assert text == body(delivery)
    assert text.startswith(delivery.summary + "\n\nState:   firing (was pending)\n")
    assert "Target:  translate-prod\nWhere:   seoul-1 (path)\n" in text
    assert "Phases:  generation → network\n" in text and "  lead_pp = 20.25\n" in text
    assert PASSWORD not in text


async def test_the_resolution_says_so_and_threads_with_the_firing(
    server: tuple[Mailbox, int], ca_file: str
) -> None:
    mailbox, port = server
    mail = notifier(port, verify=ca_file)
    await mail.notify(firing())
    await mail.notify(firing(State.RESOLVED, State.FIRING))
    fired, resolved = (message for _, message, _ in mailbox.messages)
    assert str(resolved["Subject"]).startswith("[phasewatch] Resolved: dominant phase moved")
    assert resolved["References"] == fired["References"]
    assert resolved["Message-ID"] != fired["Message-ID"]


async def test_a_server_without_starttls_gets_the_mail_in_the_clear_unless_tls_is_required(
    plain_server: tuple[Mailbox, int],
) -> None:
    mailbox, port = plain_server
    await notifier(port).notify(firing())
    [(_, _, over_tls)] = mailbox.messages
    assert not over_tls
    with pytest.raises(TransportError) as caught:
        await notifier(port, starttls="required").notify(firing())
    assert caught.value.permanent and len(mailbox.messages) == 1
    assert caught.value.message == (
        f"smtp://127.0.0.1:{port}: the server does not offer STARTTLS (starttls: required)"
    )


async def test_a_password_is_never_sent_without_tls(plain_server: tuple[Mailbox, int]) -> None:
    mailbox, port = plain_server
    with pytest.raises(TransportError) as caught:
        await notifier(port, username="pw", password=PASSWORD).notify(firing())
    assert caught.value.permanent
    assert "the password is not sent in the clear" in caught.value.message
    assert mailbox.logins == [] and mailbox.messages == []


@pytest.mark.parametrize(
    ("fields", "trusted", "said"),
    [
        ({"username": "pw", "password": "wrong-password"}, True, "SMTPAuthenticationError: 535"),
        ({}, False, "TLS certificate not trusted"),  # the system's CAs do not know trustme's
    ],
)
async def test_a_refused_login_and_an_untrusted_certificate_are_permanent(
    server: tuple[Mailbox, int], ca_file: str, fields: dict[str, str], trusted: bool, said: str
) -> None:
    mailbox, port = server
    verify = ca_file if trusted else True
    with pytest.raises(TransportError) as caught:
        await notifier(port, verify=verify, **fields).notify(firing())
    assert caught.value.permanent and said in caught.value.message
    assert "wrong-password" not in caught.value.message and mailbox.messages == []


@pytest.mark.parametrize(
    ("answer", "permanent"), [("550 5.1.1 no such user", True), ("451 4.3.0 try later", False)]
)
async def test_refused_recipients_are_permanent_on_5xx_and_tried_again_on_4xx(
    plain_server: tuple[Mailbox, int], answer: str, permanent: bool
) -> None:
    mailbox, port = plain_server
    mailbox.rcpt_answer = answer
    with pytest.raises(TransportError) as caught:
        await notifier(port).notify(firing())
    assert caught.value.permanent is permanent
    assert f"ops@example.com: {answer.split()[0]}" in caught.value.message


async def test_a_server_that_is_not_there_is_tried_again() -> None:
    port = free_port()
    with pytest.raises(TransportError) as caught:
        await notifier(port).notify(firing())
    assert not caught.value.permanent
    assert caught.value.message.startswith(f"smtp://127.0.0.1:{port}: ConnectionRefusedError")


async def test_the_sender_delivers_a_row_and_skips_the_refresh(
    sessions: sessionmaker[DbSession], plain_server: tuple[Mailbox, int]
) -> None:
    mailbox, port = plain_server
    who, outbox = identity(), Outbox(sessions)
    alert_id, fired = outbox.fire(who, "mail")
    refresh = outbox.deliver(alert_id, who, "mail", State.FIRING, State.FIRING)
    assert await Sender(sessions, {"mail": notifier(port)}).run_once() == 2
    assert [outbox.row(row).status for row in (fired, refresh)] == ["sent", "silenced"]
    assert len(mailbox.messages) == 1


def test_the_password_comes_from_the_environment_and_is_never_shown(tmp_path: Path) -> None:
    path = tmp_path / "phasewatch.yaml"
    path.write_text(
        "notifiers:\n  mail:\n    type: email\n    host: smtp.example.com\n"
        "    sender: pw@example.com\n    to: [ops@example.com]\n"
        "    username: ${SMTP_USER}\n    password: ${SMTP_PASSWORD}\n"
    )
    parsed = load_targets(path, {"SMTP_USER": "pw", "SMTP_PASSWORD": PASSWORD})
    config = parsed.notifiers["mail"]
    assert isinstance(config, EmailConfig) and config.password is not None
    assert config.password.get_secret_value() == PASSWORD and config.port == 587
    assert PASSWORD not in repr(parsed) and PASSWORD not in parsed.model_dump_json()


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ("    to: []\n", "phasewatch.yaml:6: notifiers.mail.to: List should have at least 1 item"),
        ("    to: [ops]\n", "phasewatch.yaml:6: notifiers.mail.to.0: String should match pattern"),
        (
            "    to: [ops@example.com]\n    password: x\n",
            "phasewatch.yaml:2: notifiers.mail: username and password go together",
        ),
        (
            "    to: [ops@example.com]\n    starttls: maybe\n",
            "phasewatch.yaml:7: notifiers.mail.starttls: Input should be 'if_offered', 'required'",
        ),
    ],
)
def test_bad_settings_are_refused_with_the_file_and_line(
    tmp_path: Path, fields: str, problem: str
) -> None:
    path = tmp_path / "phasewatch.yaml"
    path.write_text(
        "notifiers:\n  mail:\n    type: email\n    host: smtp.example.com\n"
        "    sender: pw@example.com\n" + fields
    )
    with pytest.raises(ConfigError) as caught:
        load_targets(path, {})
    assert problem in str(caught.value)
