"""The e-mail channel: one address, a subject and a text (and HTML) body, and an optional
one-click unsubscribe link (providers: SMTP, Amazon SES, SendGrid)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from noti.core.channel import ChannelSpec, bad_target
from noti.core.record import text_field, url_field
from noti.errors import InvalidInput

__all__ = [
    "EMAIL_BODY_MAX",
    "EMAIL_SUBJECT_MAX",
    "EMAIL_UNSUBSCRIBE_MAX",
    "ONE_CLICK",
    "EmailChannel",
    "unsubscribe_headers",
    "unsubscribe_url",
]

EMAIL_SUBJECT_MAX = 998
EMAIL_BODY_MAX = 256 * 1024
#: The longest unsubscribe URL: the most every provider carries in one header line. SES takes
#: a header value of at most 870 characters (``<`` and ``>`` included); an SMTP header line
#: may be 998 (RFC 5322 §2.1.1), and the URL cannot be folded (RFC 2369: no white space
#: inside the brackets).
EMAIL_UNSUBSCRIBE_MAX = 868
#: ``List-Unsubscribe-Post``'s one value (RFC 8058 §3.1).
ONE_CLICK = "List-Unsubscribe=One-Click"
_EMAIL = re.compile(r"^[^@\s<>(),;:\"\[\]]+@[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?\.[A-Za-z]{2,}$")
#: A URI as RFC 3986 writes it: unreserved and reserved ASCII characters, ``%`` + two hex
#: digits; nothing a header would have to encode (no space, ``<``, ``>``, ``"``, non-ASCII).
_URI = re.compile(r"^(?:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})+$")


def unsubscribe_url(value: object) -> str:
    """A one-click unsubscribe URL: http(s), at most :data:`EMAIL_UNSUBSCRIBE_MAX`
    characters, written as RFC 3986 writes URIs (percent-encode the rest).

    Raises:
        InvalidInput: ``e.cmd.noti.add.badfield``.
    """
    url = url_field("the e-mail unsubscribe link", value)
    if len(url) > EMAIL_UNSUBSCRIBE_MAX:
        raise InvalidInput(
            f"the e-mail unsubscribe link is {len(url)} characters; the limit is {EMAIL_UNSUBSCRIBE_MAX} "
            "(one header line at every provider)",
            code="e.cmd.noti.add.badfield",
        )
    if not _URI.fullmatch(url):
        raise InvalidInput(
            "the e-mail unsubscribe link must be written with the characters of RFC 3986 "
            "(percent-encode spaces, quotes, < >, non-ASCII; % takes two hex digits)",
            code="e.cmd.noti.add.badfield",
        )
    return url


def unsubscribe_headers(fields: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The headers a message with these fields carries for its unsubscribe link (none
    without one): ``List-Unsubscribe: <URL>`` (RFC 2369) and, for an https URL,
    ``List-Unsubscribe-Post: List-Unsubscribe=One-Click`` (RFC 8058 requires HTTPS for the
    one-click POST: an http link is offered to mail clients as a link to open only)."""
    url = fields.get("unsubscribe")
    if not url:
        return []
    headers = [("List-Unsubscribe", f"<{url}>")]
    if str(url).startswith("https://"):
        headers.append(("List-Unsubscribe-Post", ONE_CLICK))
    return headers


class EmailChannel(ChannelSpec):
    """E-mail: one address of at most 254 characters; the subject is one line of 1-998
    characters, the text (and the optional HTML) 1-262,144 characters; the optional
    ``unsubscribe`` link is one http(s) URL of at most 868 characters."""

    name = "email"
    title = "e-mail"
    fields: ClassVar[Mapping[str, str]] = {
        "subject": "noti_email_subject",
        "text": "noti_email_text",
        "html": "noti_email_html",
        "unsubscribe": "noti_email_unsub",
    }
    required = ("subject", "text")
    target_help = "An e-mail address"
    field_help: ClassVar[Mapping[str, str]] = {
        "subject": "E-mail subject",
        "text": "E-mail text",
        "html": "E-mail HTML body",
        "unsubscribe": "E-mail one-click unsubscribe URL (List-Unsubscribe)",
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
            elif name == "unsubscribe":
                out[name] = unsubscribe_url(value)
            else:
                out[name] = text_field(f"e-mail {name}", value, EMAIL_BODY_MAX)
        return out
