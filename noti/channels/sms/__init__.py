"""The SMS channel: a phone number and a text, and for the template-SMS vendors an optional
template per provider (providers: Twilio, Aliyun, Tencent Cloud)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from noti.core.channel import ChannelSpec, bad_target
from noti.core.record import text_field
from noti.errors import InvalidInput
from noti.inputs import bad_character, plain_json, shown

__all__ = [
    "CN_MOBILE",
    "E164_PHONE",
    "SMS_TEMPLATE_CODE_MAX",
    "SMS_TEMPLATE_ENTRIES_MAX",
    "SMS_TEXT_MAX",
    "SmsChannel",
    "phone_e164",
    "template_map",
]

#: At most this many characters (about 15 concatenated SMS parts).
SMS_TEXT_MAX = 1000
#: A record's ``template`` names at most this many providers …
SMS_TEMPLATE_ENTRIES_MAX = 16
#: … each with a vendor template code (Aliyun's ``SMS_…``, Tencent's id) of at most this many characters.
SMS_TEMPLATE_CODE_MAX = 64
#: Phone numbers noti accepts: E.164, or an 11-digit mainland mobile (providers normalise).
#: (Their patterns end in ``$``, which Python lets match before a final newline: they are
#: used with ``fullmatch``; pydantic's regular expressions, which take ``E164_PHONE.pattern``,
#: read ``$`` as the end.)
E164_PHONE = re.compile(r"^\+[1-9][0-9]{6,14}$")
CN_MOBILE = re.compile(r"^1[3-9][0-9]{9}$")
#: A provider's name as a ``template`` key: what ``[providers.<name>]`` is called.
_PROVIDER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_BAD_TEMPLATE = "e.cmd.noti.add.badtemplate"


def phone_e164(number: str) -> str | None:
    """``number`` in E.164 (a mainland mobile gets ``+86``), or None if noti does not accept it."""
    if E164_PHONE.fullmatch(number):
        return number
    if CN_MOBILE.fullmatch(number):
        return "+86" + number
    return None


def template_map(value: object) -> dict[str, str]:
    """A record's ``template``: provider name -> that vendor's template code, given as an
    object or its JSON text; 1-16 entries, each name 1-64 of ``A-Z a-z 0-9 _ . -`` (starting
    with a letter or digit), each code 1-64 characters without white space or control
    characters.

    Raises:
        InvalidInput: ``e.cmd.noti.add.badtemplate``.
    """
    data = plain_json(value, what="the SMS template", code=_BAD_TEMPLATE, max_bytes=8192)[0]
    if not 1 <= len(data) <= SMS_TEMPLATE_ENTRIES_MAX:
        raise InvalidInput(
            f"the SMS template names {len(data)} providers; give 1 to {SMS_TEMPLATE_ENTRIES_MAX} "
            '(provider name -> template code: {"aliyun": "SMS_123456789"})',
            code=_BAD_TEMPLATE,
        )
    for provider, code in data.items():
        if not _PROVIDER_NAME.fullmatch(provider):
            raise InvalidInput(
                f"the SMS template's key {shown(provider)} is not a provider name "
                "(1-64 of A-Z a-z 0-9 _ . -, starting with a letter or digit)",
                code=_BAD_TEMPLATE,
            )
        if (
            not isinstance(code, str)
            or not 1 <= len(code) <= SMS_TEMPLATE_CODE_MAX
            or bad_character(code, name=True)
            or any(c.isspace() for c in code)
        ):
            raise InvalidInput(
                f"the SMS template of {provider} must be a template code of 1-{SMS_TEMPLATE_CODE_MAX} "
                f"characters without white space or control characters, got {shown(code)}",
                code=_BAD_TEMPLATE,
            )
    return data


class SmsChannel(ChannelSpec):
    """SMS: the target is E.164 (``+8613912345678``) or a mainland mobile (``13912345678``);
    the text is 1-1,000 characters; ``template`` (a JSON object) gives the template-SMS
    providers a vendor template per provider name (:func:`template_map`)."""

    name = "sms"
    title = "SMS"
    fields: ClassVar[Mapping[str, str]] = {"text": "noti_sms_text", "template": "noti_sms_tmpl"}
    required = ("text",)
    json_fields = frozenset({"template"})
    target_help = "A phone number: E.164 (+8613912345678) or an 11-digit mainland mobile"
    field_help: ClassVar[Mapping[str, str]] = {
        "text": "SMS text",
        "template": 'SMS vendor template per provider name (a JSON object: {"aliyun": "SMS_123"})',
    }
    stdin_field = "text"
    docs = "channels/sms.md"

    def check_target(self, target: str) -> str:
        if not (E164_PHONE.fullmatch(target) or CN_MOBILE.fullmatch(target)):
            raise bad_target(
                f"{target!r} is not a phone number: use E.164 (+8613912345678) "
                "or an 11-digit mainland mobile number"
            )
        return target

    def check_fields(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        return {
            name: template_map(value) if name == "template" else text_field("SMS text", value, SMS_TEXT_MAX)
            for name, value in fields.items()
        }
