"""The e-mail channel: one address, a subject and a text (and HTML) body (providers: SMTP,
Amazon SES, SendGrid)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from noti.core.channel import ChannelSpec, bad_target
from noti.core.record import text_field

__all__ = ["EMAIL_BODY_MAX", "EMAIL_SUBJECT_MAX", "EmailChannel"]

EMAIL_SUBJECT_MAX = 998
EMAIL_BODY_MAX = 256 * 1024
_EMAIL = re.compile(r"^[^@\s<>(),;:\"\[\]]+@[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?\.[A-Za-z]{2,}$")


class EmailChannel(ChannelSpec):
    """E-mail: one address of at most 254 characters; the subject is one line of 1-998
    characters, the text (and the optional HTML) 1-262,144 characters."""

    name = "email"
    title = "e-mail"
    fields: ClassVar[Mapping[str, str]] = {
        "subject": "noti_email_subject",
        "text": "noti_email_text",
        "html": "noti_email_html",
    }
    required = ("subject", "text")
    target_help = "An e-mail address"
    field_help: ClassVar[Mapping[str, str]] = {
        "subject": "E-mail subject",
        "text": "E-mail text",
        "html": "E-mail HTML body",
    }
    stdin_field = "text"
    docs = "channels/email.md"

    def check_target(self, target: str) -> str:
        if len(target) > 254 or not _EMAIL.fullmatch(target):
            raise bad_target(f"{target!r} is not an e-mail address")
        return target

    def check_fields(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, value in fields.items():
            if name == "subject":  # a header: one line (no \n, \r, U+0085, U+2028, form feed …)
                out[name] = text_field("the e-mail subject", value, EMAIL_SUBJECT_MAX, one_line=True)
            else:
                out[name] = text_field(f"e-mail {name}", value, EMAIL_BODY_MAX)
        return out
