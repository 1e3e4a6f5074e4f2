"""The ntfy provider: publishes a message to ``<base_url>/<topic>`` (ntfy's HTTP publish API:
the body is the message; ``Title``, ``Priority`` and ``X-Sequence-ID`` headers; an access token
as ``Authorization: Bearer``). ntfy answers the published message as JSON (its ``id`` becomes
the record's message id); 429 is a rate limit, 401/403 a bad token, other 4xx a refusal, 5xx
and network failures are retried by noti."""

from __future__ import annotations

from typing import ClassVar

import httpx
from pydantic import SecretStr

from noti.core.channel import Channel
from noti.errors import PermanentFailure, ProviderMisconfigured, RateLimited, TemporaryFailure
from noti.providers.base import Message, Provider, ProviderOptions, Receipt

__all__ = ["NtfyProvider"]


class NtfyOptions(ProviderOptions):
    """``[providers.<name>]`` of ``kind = "ntfy"``."""

    base_url: str = "https://ntfy.sh"
    token: SecretStr | None = None


class NtfyProvider(Provider):
    """Publishes ntfy messages."""

    kind = "ntfy"
    channels: ClassVar[frozenset[Channel]] = frozenset({Channel("ntfy")})
    Options = NtfyOptions
    options: NtfyOptions

    def send(self, message: Message) -> Receipt:
        fields = message.fields
        # noti's levels map onto ntfy's priorities when the notification names none
        priority = fields.get("priority") or ("5" if message.level >= 100 else "3")
        headers = {"Priority": str(priority), "X-Noti-Id": message.id}
        if fields.get("title"):
            headers["Title"] = fields["title"]
        if self.options.token is not None:
            headers["Authorization"] = f"Bearer {self.options.token.get_secret_value()}"
        url = f"{self.options.base_url.rstrip('/')}/{message.target}"
        try:
            response = httpx.post(
                url, content=fields["message"].encode(), headers=headers, timeout=self.options.timeout_s
            )
        except httpx.HTTPError as exc:
            raise TemporaryFailure(f"{self.name}: ntfy did not answer: {exc}") from None
        if response.status_code == 429:
            raise RateLimited(f"{self.name}: ntfy rate limit", retry_after_s=10.0)
        if response.status_code in (401, 403):
            raise ProviderMisconfigured(f"{self.name}: ntfy refused the token ({response.status_code})")
        if 400 <= response.status_code < 500:
            raise PermanentFailure(f"{self.name}: ntfy refused the message ({response.status_code})")
        if response.status_code >= 300:
            raise TemporaryFailure(f"{self.name}: ntfy answered {response.status_code}")
        return Receipt(
            provider=self.name, msgid=str(response.json().get("id") or ""), raw=response.text[:200]
        )
