"""The provider registry: which provider classes exist and which instances are configured.

Built-in kinds are listed in :data:`BUILTIN` and imported only when used; third-party
packages add kinds through the ``noti.providers`` entry-point group
(``mykind = "mypkg.module:MyProvider"``). Instances are named by the settings'
``[providers.<name>]`` tables; a name without a table is an instance of the kind of the
same name with default options (so ``-provider sandbox`` works with no configuration).
"""

from __future__ import annotations

import functools
import threading
from importlib.metadata import entry_points
from typing import Any

import redis

from noti.config import Settings
from noti.core.keys import Keys
from noti.core.record import Channel
from noti.errors import InvalidConfig, InvalidInput
from noti.imports import load_object
from noti.providers.base import Message, Provider, ProviderOptions, Receipt
from noti.redis.conn import PoolClient

__all__ = ["BUILTIN", "Message", "Provider", "ProviderOptions", "ProviderSet", "Receipt", "load_kind"]

#: kind -> "module:Class" of the providers that ship with noti.
BUILTIN: dict[str, str] = {
    "sandbox": "noti.providers.sandbox:SandboxProvider",
    "weixin": "noti.channels.weixin.provider:WeixinProvider",
    "email": "noti.channels.email.smtp:EmailProvider",
    "twilio": "noti.channels.sms.twilio:TwilioProvider",
    "webhook": "noti.channels.webhook.provider:WebhookProvider",
    "aliyun": "noti.channels.sms.aliyun:AliyunSmsProvider",
    "tencent": "noti.channels.sms.tencent:TencentSmsProvider",
    "ses": "noti.channels.email.ses:SesProvider",
    "sendgrid": "noti.channels.email.sendgrid:SendGridProvider",
    "dingtalk": "noti.channels.chat.dingtalk:DingTalkProvider",
    "feishu": "noti.channels.chat.feishu:FeishuProvider",
    "wecom": "noti.channels.chat.wecom:WecomProvider",
    "slack": "noti.channels.chat.slack:SlackProvider",
    "telegram": "noti.channels.chat.telegram:TelegramProvider",
    "apprise": "noti.channels.chat.via_apprise:AppriseProvider",
    "fcm": "noti.channels.push.fcm:FcmProvider",
    "apns": "noti.channels.push.apns:ApnsProvider",
}
ENTRY_POINT_GROUP = "noti.providers"


@functools.cache
def available_kinds() -> dict[str, str]:
    """Every known kind with its import path: built-ins, then installed entry points.

    Read once per process: scanning installed distributions costs milliseconds.
    """
    kinds = dict(BUILTIN)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        kinds.setdefault(ep.name, ep.value)
    return kinds


def load_kind(kind: str) -> type[Provider]:
    """The provider class of ``kind``: a registered kind, or a ``"module:Class"`` path.

    Raises:
        InvalidConfig: unknown kind, or its module (an optional extra) cannot be imported.
    """
    # a built-in kind is known without scanning the installed distributions' entry points
    # (built-ins win over entry points of the same name in available_kinds too): that scan
    # was ~3 ms of each ``noti add`` (bench scenario 10)
    path = kind if ":" in kind else BUILTIN.get(kind) or available_kinds().get(kind)
    if path is None:
        known = ", ".join(sorted(available_kinds()))
        raise InvalidConfig(f"unknown provider kind {kind!r} (installed: {known})")
    cls = load_object(path, what=f"provider kind {kind!r}")
    if not (isinstance(cls, type) and issubclass(cls, Provider)):
        raise InvalidConfig(f"{path} is not a noti Provider class")
    return cls


class ProviderSet:
    """The configured provider instances of one process, created on first use."""

    def __init__(
        self, settings: Settings, *, redis: redis.Redis, keys: Keys, pool_redis: PoolClient | None = None
    ) -> None:
        self._settings = settings
        self._redis = redis
        self._pool_redis = pool_redis
        self._keys = keys
        self._instances: dict[str, Provider] = {}
        self._chains: dict[tuple[Channel, str | None], list[Provider]] = {}
        self._lock = threading.Lock()

    def _options(self, name: str) -> dict[str, Any]:
        return dict(self._settings.providers.get(name, {}))

    def get(self, name: str) -> Provider:
        """The provider instance called ``name``.

        Raises:
            InvalidConfig: no such provider, or its options are invalid.
        """
        with self._lock:
            instance = self._instances.get(name)
            if instance is None:
                options = self._options(name)
                if name not in self._settings.providers and name not in available_kinds():
                    configured = ", ".join(sorted(self._settings.providers)) or "none"
                    raise InvalidConfig(
                        f"no provider called {name!r} (configured: {configured}); "
                        f"add a [providers.{name}] table to the settings"
                    )
                kind = options.get("kind") or name
                if not isinstance(kind, str):
                    raise InvalidConfig(f"[providers.{name}] kind: must be a string, not {kind!r}")
                try:
                    cls = load_kind(kind)
                except InvalidConfig as exc:
                    raise InvalidConfig(f"[providers.{name}] kind: {exc.message}") from None
                instance = cls(name, options, redis=self._redis, keys=self._keys)
                if self._pool_redis is not None:
                    instance.pool_redis = self._pool_redis
                self._instances[name] = instance
            return instance

    def chain_names(self, channel: Channel, requested: str | None) -> list[str]:
        """Provider names for a record, in failover order.

        Raises:
            InvalidInput: none requested and the channel has no default
                (``e.cmd.noti.add.noprovider``), or a name is empty.
        """
        spec = requested or self._settings.channel(channel.value).provider
        if not spec:
            raise InvalidInput(
                f"no provider for {channel.value}: pass -provider NAME or set "
                f"[channels.{channel.value}] provider in the settings",
                code="e.cmd.noti.add.noprovider",
            )
        names = [part.strip() for part in spec.split(",")]
        if any(not n for n in names):
            raise InvalidInput(f"bad provider list {spec!r}", code="e.cmd.noti.add.noprovider")
        return names

    def chain(self, channel: Channel, requested: str | None) -> list[Provider]:
        """The provider instances for a record, checked to serve its channel.

        Raises:
            InvalidInput: see :meth:`chain_names`, or a provider that does not serve the channel.
            InvalidConfig: a named provider is not configured or cannot be loaded.
        """
        cached = self._chains.get((channel, requested))
        if cached is not None:
            return cached
        chain = []
        for name in self.chain_names(channel, requested):
            if name not in self._settings.providers and name not in available_kinds():
                configured = ", ".join(sorted(self._settings.providers)) or "none"
                raise InvalidInput(
                    f"no provider called {name!r} (configured: {configured})",
                    code="e.cmd.noti.add.noprovider",
                )
            provider = self.get(name)
            if channel not in provider.channels:
                raise InvalidInput(
                    f"provider {name!r} does not send {channel.value} notifications",
                    code="e.cmd.noti.add.noprovider",
                )
            chain.append(provider)
        self._chains[(channel, requested)] = chain
        return chain

    def close(self) -> None:
        with self._lock:
            for instance in self._instances.values():
                instance.close()
            self._instances.clear()
            self._chains.clear()
