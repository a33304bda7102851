"""Email over SMTP: one plain-text message per notification, its subject the alert's
sentence.

The exchange (Python's ``smtplib``, in a worker thread) upgrades to TLS with STARTTLS
whenever the server offers it (``starttls: if_offered``), and ``starttls: required``
refuses a server that does not offer it. A password is never sent in the clear: a login
without TLS is refused before it is tried. The certificate is verified (``verify``: the
system's CAs, a CA bundle's path, or ``false``).

Each message's ``Message-ID`` is made from the idempotency key (a receiver, or a person,
can tell a repeat) and ``References`` from ``Delivery.alert_key``, so a mail client
threads an alert's firing and its resolution together.

How a failure is judged: an SMTP reply of 5xx (recipient unknown, message refused,
authentication failed), a missing STARTTLS that is required and an untrusted certificate
are permanent; 4xx replies, refused or dropped connections and timeouts are tried again.
"""

from __future__ import annotations

import asyncio
import smtplib
import ssl
from email.message import EmailMessage
from email.utils import format_datetime
from typing import Annotated, Literal, Self

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from app.envvars import expand_field
from app.notifiers.base import Delivery, Notifier, Secret, TransportError, number_text, scrub

ADDRESS = r"^[^@\s<>,;]+@[^@\s<>,;]+$"
TITLE = {"firing": "Firing", "recovering": "Recovering", "resolved": "Resolved"}
_MAX_SUBJECT = 200


class EmailConfig(BaseModel):
    # Errors never echo what was given: it may be a secret.
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    type: Literal["email"] = Field(description="The notifier kind.")
    host: str = Field(pattern=r"^[A-Za-z0-9._:\[\]-]+$", description="The SMTP server.")
    port: int = Field(587, ge=1, le=65535, description="Its port (587: submission).")
    sender: str = Field(pattern=ADDRESS, description="The From: address.")
    to: list[Annotated[str, Field(pattern=ADDRESS)]] = Field(
        min_length=1, description="The recipients' addresses."
    )
    username: Annotated[str, BeforeValidator(expand_field)] | None = Field(
        None, description="To log in with; `${ENV}` expands."
    )
    password: Secret | None = Field(None, description="With `username`; `${ENV}` expands.")
    starttls: Literal["if_offered", "required", "never"] = Field(
        "if_offered", description="Upgrade to TLS when the server offers it, always, or never."
    )
    verify: bool | str = Field(True, description="TLS verification, or a CA bundle path.")
    timeout: float = Field(30.0, gt=0, le=300, description="Seconds for the whole exchange.")
    external_url: str | None = Field(
        None, pattern=r"^https?://", description="phasewatch's own address, for links back."
    )

    @model_validator(mode="after")
    def _login_whole(self) -> Self:
        if (self.username is None) != (self.password is None):
            raise ValueError("username and password go together: give both or neither")
        return self


class Email(Notifier[EmailConfig]):
    async def notify(self, delivery: Delivery) -> None:
        mail = message(delivery, self.config)
        try:
            async with asyncio.timeout(self.config.timeout):
                await asyncio.to_thread(self._send, mail)
        except TimeoutError:
            raise TransportError(
                f"{self.shown}: no answer within {self.config.timeout:g} s"
            ) from None

    @property
    def shown(self) -> str:
        return f"smtp://{self.config.host}:{self.config.port}"

    def _send(self, mail: EmailMessage) -> None:
        try:
            with smtplib.SMTP(
                self.config.host, self.config.port, timeout=self.config.timeout
            ) as smtp:
                self._exchange(smtp, mail)
        except TransportError as exc:
            raise TransportError(f"{self.shown}: {exc.message}", exc.permanent) from None
        except Exception as exc:
            reason, permanent = judge(exc)
            raise TransportError(
                f"{self.shown}: {scrub(reason, self.secrets())}", permanent
            ) from None

    def _exchange(self, smtp: smtplib.SMTP, mail: EmailMessage) -> None:
        smtp.ehlo()
        secure = self.config.starttls != "never" and smtp.has_extn("starttls")
        if secure:
            smtp.starttls(context=tls_context(self.config.verify))
            smtp.ehlo()
        elif self.config.starttls == "required":
            raise TransportError("the server does not offer STARTTLS (starttls: required)", True)
        if self.config.username is not None and self.config.password is not None:
            if not secure:
                raise TransportError("no TLS: the password is not sent in the clear", True)
            smtp.login(self.config.username, self.config.password.get_secret_value())
        refused = smtp.send_message(mail)
        if refused:
            said = "; ".join(
                f"{to}: {code} {text.decode(errors='replace')}"
                for to, (code, text) in refused.items()
            )
            raise TransportError(f"sent, but these recipients were refused: {said}", True)


def tls_context(verify: bool | str) -> ssl.SSLContext:
    if verify is False:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    return ssl.create_default_context(cafile=verify if isinstance(verify, str) else None)


def judge(exc: Exception) -> tuple[str, bool]:
    """What went wrong, in one line, and whether it is permanent."""
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        codes = [code for code, _ in exc.recipients.values()]
        said = "; ".join(
            f"{to}: {code} {_text(text)}" for to, (code, text) in exc.recipients.items()
        )
        return f"recipients refused: {said}", all(code >= 500 for code in codes)
    if isinstance(exc, smtplib.SMTPResponseException):
        return (
            f"{type(exc).__name__}: {exc.smtp_code} {_text(exc.smtp_error)}",
            exc.smtp_code >= 500,
        )
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS certificate not trusted: {exc.verify_message}", True
    if isinstance(exc, smtplib.SMTPNotSupportedError):
        return f"{type(exc).__name__}: {exc}", True
    return f"{type(exc).__name__}: {exc}", False


def _text(said: bytes | str) -> str:
    text = said.decode(errors="replace") if isinstance(said, bytes) else said
    return " ".join(text.split())


def message(delivery: Delivery, config: EmailConfig) -> EmailMessage:
    mail = EmailMessage()
    subject = " ".join(f"[phasewatch] {title(delivery)}: {delivery.summary}".split())
    mail["Subject"] = subject if len(subject) <= _MAX_SUBJECT else subject[: _MAX_SUBJECT - 1] + "…"
    mail["From"] = config.sender
    mail["To"] = ", ".join(config.to)
    mail["Date"] = format_datetime(delivery.at, usegmt=True)
    mail["Message-ID"] = f"<{delivery.idempotency_key}@phasewatch>"
    mail["References"] = f"<{delivery.alert_key}@phasewatch>"
    mail["X-Phasewatch-Idempotency-Key"] = delivery.idempotency_key
    mail.set_content(body(delivery, config.external_url))
    return mail


def title(delivery: Delivery) -> str:
    if delivery.refresh:
        return "Still firing"
    return TITLE.get(delivery.state, delivery.state.capitalize())


def body(delivery: Delivery, external_url: str | None = None) -> str:
    p = delivery.payload
    facts = [
        ("State", f"{delivery.state} (was {p.get('previous') or 'nothing'})"),
        ("Target", str(p.get("target", "?"))),
        ("Where", f"{p.get('vantage') or 'all vantages'} ({p.get('scope', '?')})"),
        ("Alert", f"{p.get('alert', '?')} · {p.get('severity', '?')}"),
        ("At", delivery.at.strftime("%Y-%m-%d %H:%M:%S UTC")),
    ]
    if p.get("from_phase") or p.get("to_phase"):
        facts.insert(4, ("Phases", f"{p.get('from_phase') or '?'} → {p.get('to_phase') or '?'}"))
    lines = [delivery.summary, ""] + [f"{name + ':':<8} {value}" for name, value in facts]
    if delivery.numbers:
        lines += ["", "Numbers:"]
        lines += [f"  {k} = {number_text(v)}" for k, v in sorted(delivery.numbers.items())]
    if external_url:
        lines += ["", external_url]
    lines += ["", f"Idempotency key: {delivery.idempotency_key}"]
    return "\n".join(lines) + "\n"
