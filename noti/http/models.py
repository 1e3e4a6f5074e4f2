"""The HTTP API's request and response bodies: the OpenAPI schema (``/openapi.json``) is
generated from these models, so it cannot drift from what the routes read and write.

Bodies are parsed strictly (no ``"5"`` for a number) and refuse unknown keys; what a field
means and whether its value is acceptable is then checked by noti itself (the codes of
:mod:`noti.sending.notifier` and :mod:`noti.sending.bulk`), exactly as for ``notify()``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Header
from pydantic import BaseModel, ConfigDict, Field, create_model

from noti.core.channel import BUILTIN, Channel, fields_by_name
from noti.errors import InvalidConfig

__all__ = [
    "BATCH_MAX",
    "BatchOut",
    "ErrorBody",
    "ErrorOut",
    "EventIn",
    "EventOut",
    "Health",
    "IdempotencyKey",
    "KEY_MAX",
    "NotificationBase",
    "NotificationIn",
    "NotificationsOut",
    "RecordOut",
    "Refusal",
    "RevokeOut",
    "StoredOut",
]

log = logging.getLogger(__name__)

#: The most notifications one ``POST /v1/notifications`` takes.
BATCH_MAX = 1000

_STRICT = ConfigDict(extra="forbid", strict=True)

#: Characters an ``Idempotency-Key`` header may have (a batch's items get ``<key>#<index>``,
#: within the 200 an idempotency key may have).
KEY_MAX = 190

#: The ``Idempotency-Key`` header of the routes that store (notifications, events, notices).
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        max_length=KEY_MAX,
        description="The same key again (same user, within NOTI_IDEMPOTENCY_TTL_S) stores nothing "
        "and answers the first call's ids",
    ),
]


class NotificationBase(BaseModel):
    """One notification: the arguments of :func:`noti.notify` (``to`` or ``target``) that
    every channel takes; :data:`NotificationIn` adds the channels' fields."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={
            "examples": [{"type": "sms", "to": "+8613912345678", "text": "Your code is 4321"}]
        },
    )

    type: str = Field(description="The channel: " + ", ".join(BUILTIN) + ", or an installed one")
    to: str | None = Field(
        default=None, description="Phone number, openid, e-mail address, URL, device token …"
    )
    target: str | None = Field(default=None, description="The same as to")
    lv: int | None = Field(
        default=None, description="Level 1-1000 (lowered to the user's role cap and the token's cap)"
    )
    provider: str | None = Field(default=None, description="Provider name(s), comma-separated, in order")
    retry_max: int | None = Field(default=None, description="Attempt limit, 1-100")
    retry_policy: str | None = Field(default=None, description="linear[:S[:CAP]] or exponential[:S[:CAP]]")
    delay: float | None = Field(default=None, description="Send after this many seconds")
    eta: str | None = Field(default=None, description="Send at this time (ISO 8601)")
    identifier: str | None = Field(default=None, description="Debounce key: replaces a delayed one")
    status_callback: str | None = Field(
        default=None, description="An http(s) URL each of its status changes is posted to (signed)"
    )
    idempotency_key: str | None = Field(
        default=None, description="This item's own idempotency key (instead of the Idempotency-Key header)"
    )
    fallback: dict[str, Any] | None = Field(
        default=None,
        description="Sent instead if no delivery receipt comes in time: type, to, its fields, after_s",
    )


def notification_model() -> type[NotificationBase]:
    """``NotificationIn``: :class:`NotificationBase` plus every registered channel's fields
    (each optional; a JSON field takes an object or its text), so the schema follows the
    channel registry. A channel whose package cannot be loaded is left out (logged)."""

    def left_out(channel: Channel, exc: InvalidConfig) -> None:
        log.warning("the HTTP API leaves channel %s out: %s", channel.value, exc.message)

    fields: dict[str, Any] = {}
    for name, uses in fields_by_name(Channel, broken=left_out).items():
        kind: Any = dict[str, Any] | str | None if any(u.json for u in uses) else str | None
        description = "; ".join(dict.fromkeys(u.help for u in uses))
        fields[name] = (kind, Field(default=None, description=description))
    model: type[NotificationBase] = create_model(
        "NotificationIn", __base__=NotificationBase, __module__=__name__, **fields
    )
    return model


if TYPE_CHECKING:
    NotificationIn = NotificationBase
else:
    #: One notification of ``POST /v1/notifications`` (built from the channel registry at import).
    NotificationIn = notification_model()


class StoredOut(BaseModel):
    """A notification stored (or the one an idempotency key named)."""

    id: str


class Refusal(BaseModel):
    """An item of a batch that was refused, and why."""

    index: int
    code: str
    message: str


class BatchOut(BaseModel):
    """A batch stored: ``ids[i]`` is item i's record id (None: refused, see ``refused``)."""

    ids: list[str | None]
    refused: list[Refusal] = Field(default_factory=list)


class RecordOut(BaseModel):
    """A notification record as ``noti get -json`` shows it (the seed's field names; the
    channel's fields depend on its type)."""

    model_config = ConfigDict(extra="allow")

    id: str
    tp: str
    ct: int = Field(description="Created, epoch ms")
    lm: int = Field(description="Last modified, epoch ms")
    noti_c: str = Field(description="Its user")
    noti_type: str
    noti_target: str
    noti_st: int = Field(description="Status: -1 invalid, 0 failed, 1 waiting, 10 done")
    noti_lv: int


class NotificationsOut(BaseModel):
    """Records, newest first."""

    notifications: list[RecordOut]


class StepOut(BaseModel):
    """One step of a record's life (:mod:`noti.core.timeline`): when, what, and its details
    (provider, ms, msgid, code, text, state, worker…, as the event has them)."""

    model_config = ConfigDict(extra="allow")

    at: int = Field(description="When, epoch ms")
    event: str = Field(description="created, delayed, held, claimed, attempt, failover, sent, retry, …")


class TimelineOut(BaseModel):
    """A record's steps, oldest first; ``dropped``: older steps no longer kept (the newest 50 are)."""

    id: str
    dropped: int
    steps: list[StepOut]


class RevokeOut(BaseModel):
    """``DELETE``: ``revoked`` (it will never be sent) or ``held`` (a sender holds it right
    now: it is revoked at its next claim unless the send in progress delivers it)."""

    id: str
    state: str


class EventIn(BaseModel):
    """An event to dispatch (:meth:`noti.events.Events.dispatch`)."""

    model_config = _STRICT

    name: str = Field(description="The event's name, e.g. order.paid")
    payload: dict[str, Any] = Field(default_factory=dict, description="What the listeners' templates see")


class EventOut(BaseModel):
    """An event dispatched."""

    id: str


class Health(BaseModel):
    """``GET /v1/health``: Redis answers."""

    status: str
    redis: str


class ErrorBody(BaseModel):
    """What went wrong: a stable noti error code and a message for people."""

    model_config = ConfigDict(extra="allow")

    code: str
    message: str


class ErrorOut(BaseModel):
    """Every error answer."""

    error: ErrorBody
