"""The SMS channel: a phone number and a text (providers: Twilio, Aliyun, Tencent Cloud)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from noti.core.channel import ChannelSpec, bad_target
from noti.core.record import text_field

__all__ = ["CN_MOBILE", "E164_PHONE", "SMS_TEXT_MAX", "SmsChannel", "phone_e164"]

#: At most this many characters (about 15 concatenated SMS parts).
SMS_TEXT_MAX = 1000
#: Phone numbers noti accepts: E.164, or an 11-digit mainland mobile (providers normalise).
#: (Their patterns end in ``$``, which Python lets match before a final newline: they are
#: used with ``fullmatch``; pydantic's regular expressions, which take ``E164_PHONE.pattern``,
#: read ``$`` as the end.)
E164_PHONE = re.compile(r"^\+[1-9][0-9]{6,14}$")
CN_MOBILE = re.compile(r"^1[3-9][0-9]{9}$")


def phone_e164(number: str) -> str | None:
    """``number`` in E.164 (a mainland mobile gets ``+86``), or None if noti does not accept it."""
    if E164_PHONE.fullmatch(number):
        return number
    if CN_MOBILE.fullmatch(number):
        return "+86" + number
    return None


class SmsChannel(ChannelSpec):
    """SMS: the target is E.164 (``+8613912345678``) or a mainland mobile (``13912345678``);
    the text is 1-1,000 characters."""

    name = "sms"
    title = "SMS"
    fields: ClassVar[Mapping[str, str]] = {"text": "noti_sms_text"}
    required = ("text",)
    target_help = "A phone number: E.164 (+8613912345678) or an 11-digit mainland mobile"
    field_help: ClassVar[Mapping[str, str]] = {"text": "SMS text"}
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
        return {name: text_field("SMS text", value, SMS_TEXT_MAX) for name, value in fields.items()}
