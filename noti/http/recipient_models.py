"""The bodies of the recipients routes (:mod:`noti.http.recipients`): what the OpenAPI schema
shows of them.

Profiles, patches, preferences, category declarations and template documents are free-form
JSON objects here: :mod:`noti.recipients` checks them (one set of rules and error codes for
the Python API, the CLI and HTTP), so these models only say "an object". The answers mirror
the ``to_dict()`` of the Python API's values.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query
from pydantic import BaseModel, ConfigDict, Field

from noti.http.models import ErrorOut

__all__ = [
    "ERRORS",
    "CategoriesOut",
    "CategoryOut",
    "DeletedOut",
    "ErasureOut",
    "HistoryOut",
    "ImportOut",
    "ImportRefusal",
    "JsonObject",
    "MergeIn",
    "NoticeChannelOut",
    "NoticeIn",
    "NoticeOut",
    "DigestsOut",
    "OpenWindowOut",
    "Owner",
    "ThrottlesOut",
    "RecipientOut",
    "RecipientsOut",
    "TemplateInfoOut",
    "TemplateOut",
    "TemplatesOut",
    "TemplateVersionOut",
    "UnsubscribedOut",
]

_STRICT = ConfigDict(extra="forbid", strict=True)

#: A JSON object whose keys noti checks itself (see the module docstring).
JsonObject = dict[str, Any]

#: The error answers of the recipients routes.
ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorOut, "description": "No API token, or an unknown, expired or revoked one"},
    403: {"model": ErrorOut, "description": "owner= names another user (root members only)"},
    404: {"model": ErrorOut, "description": "No such recipient, template or notice, or another user's"},
    413: {"model": ErrorOut, "description": "The body is too large"},
    422: {"model": ErrorOut, "description": "Refused; nothing stored"},
    429: {"model": ErrorOut, "description": "The token is over its rate limit (see Retry-After)"},
    503: {"model": ErrorOut, "description": "Redis did not answer; try again"},
}
#: ``?owner=``: a root member acting on another user's recipients and templates.
Owner = Annotated[
    str | None,
    Query(max_length=64, description="Another user's (root members only; default: the token's user)"),
]


class RecipientOut(BaseModel):
    """One recipient's profile (:class:`noti.recipients.profile.Recipient`)."""

    id: str
    addresses: dict[str, list[str]] = Field(description="Channel -> addresses, the primary first")
    locale: str | None
    timezone: str | None
    quiet_hours: str = Field(description='"HH:MM-HH:MM", "off", or "default" (the operator\'s)')
    attributes: dict[str, Any]
    created_ms: int
    updated_ms: int


class RecipientsOut(BaseModel):
    """A page of recipients, oldest first; ``next``: pass it as ``after`` for the next page
    (null: this was the last)."""

    recipients: list[RecipientOut]
    next: str | None


class MergeIn(BaseModel):
    """``POST /v1/recipients/{id}/merge``: the recipient merged into ``{id}`` (and removed)."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=False)

    from_: str = Field(alias="from", description="The id of the recipient merged in (and removed)")


class ErasureOut(BaseModel):
    """What erasing a recipient did: waiting records revoked, kept records masked, notices
    that named them."""

    recipient: str
    revoked: int
    masked: int
    notices: int
    dead_letters: int = Field(0, description="Dead-letter entries of their records written again, masked")


class ImportRefusal(BaseModel):
    """A row of an import that was refused (rows count from 1, the CSV header aside)."""

    row: int
    code: str
    message: str


class ImportOut(BaseModel):
    """What an import did: profiles created, replaced, and the rows refused."""

    created: int
    updated: int
    refused: list[ImportRefusal]


class ThrottleStateOut(BaseModel):
    """One category's throttle on one channel of the recipient, as it stands."""

    category: str
    channel: str
    sent: int = Field(description="Sends the current period holds (delayed ones at their future time too)")
    limit: int
    period: float = Field(description="Seconds")
    over: str = Field(description="drop or delay")
    free_at_ms: int = Field(description="When the next send fits (now when it does)")


class ThrottlesOut(BaseModel):
    recipient: str
    throttles: list[ThrottleStateOut]


class OpenWindowOut(BaseModel):
    """One open digest window."""

    window: str = Field(description="The notice the window makes when it closes")
    recipient: str
    digest: str
    events: int = Field(description="Events in it so far")
    opened_ms: int
    due_ms: int


class DigestsOut(BaseModel):
    digests: list[OpenWindowOut]


class HistoryOut(BaseModel):
    """Notice ids (``n…``) and record ids made for a recipient, newest first."""

    recipient: str
    history: list[str]


class ThrottleOut(BaseModel):
    """At most ``limit`` notices per recipient and channel in any ``period`` seconds."""

    limit: int
    period: float = Field(description="Seconds")
    over: str = Field(description="drop (an invalid record), delay (due when it fits) or digest")
    template: str | None = Field(None, description="The digest's template (over digest)")


class CategoryOut(BaseModel):
    """A message category (:mod:`noti.recipients.categories`)."""

    name: str
    channels: dict[str, bool] = Field(description="Channel -> on by default (a channel not named: on)")
    opt_out: bool
    critical: bool
    description: str
    throttle: ThrottleOut | None = Field(None, description="The per-recipient throttle, if any")


class CategoriesOut(BaseModel):
    categories: list[CategoryOut]


class DeletedOut(BaseModel):
    """A category or template removed."""

    name: str
    deleted: bool


class TemplateVersionOut(BaseModel):
    """A template version stored."""

    name: str
    version: int


class TemplateOut(BaseModel):
    """One version of a template: its document as stored."""

    name: str
    version: int
    default_locale: str
    channels: list[str]
    description: str
    created_ms: int
    document: dict[str, Any]


class TemplateInfoOut(BaseModel):
    """A template as listed: its current version's channels and locales."""

    name: str
    version: int
    channels: list[str]
    locales: list[str]
    default_locale: str
    description: str
    created_ms: int
    modified_ms: int


class TemplatesOut(BaseModel):
    templates: list[TemplateInfoOut]


class NoticeIn(BaseModel):
    """``POST /v1/notices``: notify one recipient from a template (the arguments of
    ``noti.notify(recipient=…, template=…)``)."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={
            "examples": [
                {"recipient": "42", "template": "order_shipped", "data": {"order": 7}, "category": "orders"}
            ]
        },
    )

    recipient: str | int = Field(description="The recipient's id (the token user's recipient)")
    template: str = Field(description="A template name, or name@version")
    data: dict[str, Any] | None = Field(default=None, description="The template's variables")
    category: str | None = Field(default=None, description="The message category (default: general)")
    channels: list[str] | str | None = Field(
        default=None,
        description="Only these channels, a list or comma-separated (default: the template's)",
    )
    chain: list[str] | str | None = Field(
        default=None, description="A fallback chain instead: the first channel allowed, then the next"
    )
    after_s: float | None = Field(
        default=None, description="A chain's fallback goes after this many seconds without a receipt"
    )
    locale: str | None = Field(default=None, description="This locale instead of the recipient's")
    lv: int | None = Field(
        default=None, description="Level 1-1000 (lowered to the role's and the token's cap)"
    )
    delay: float | None = Field(default=None, description="Send after this many seconds")
    eta: str | None = Field(
        default=None, description="Send at this time (ISO 8601), as POST /v1/notifications"
    )
    owner: str | None = Field(default=None, description="Another user's recipient (root members only)")
    digest: str | None = Field(
        default=None,
        description="Put the event into the recipient's digest of this key (one notice per window)",
    )
    window: str | float | None = Field(
        default=None, description="The digest's window: seconds, 10m / 2h / 1d, or daily 09:00"
    )
    digest_max: int | None = Field(default=None, description="Events a window keeps in full (1-1000; 50)")
    backoff: bool | None = Field(default=None, description="The window's first event goes at once")
    dedupe: str | bool | None = Field(
        default=None,
        description="A deduplication key for this recipient, or true (the content's): one notice per window",
    )
    dedupe_window: str | float | None = Field(
        default=None, description="How long the deduplication key holds: seconds or 10m / 2h / 1d (1h)"
    )


class NoticeChannelOut(BaseModel):
    """What became of one channel of a notice."""

    channel: str
    state: str = Field(
        description="queued, held, scheduled, throttled, digested (its record: the digest window), "
        "fallback, suppressed, off, unused, noaddress or notemplate"
    )
    record: str | None = Field(description="The record made for it, if any")
    reason: str | None = Field(description="Why it was suppressed: optout, suppressed or throttled")
    locale: str | None


class NoticeOut(BaseModel):
    """One ``notify(recipient=…)`` call and what became of it (``noti get <notice id>``)."""

    id: str
    owner: str
    recipient: str
    template: str
    version: int
    category: str
    mode: str = Field(
        description="all (every channel allowed), chain, or digest (an event put into a digest window: "
        "the id is the notice the window makes when it closes; no channels yet)"
    )
    created_ms: int
    held_until_ms: int | None = Field(description="When quiet hours end, if they held it")
    channels: list[NoticeChannelOut]
    repeated: bool = Field(description="An Idempotency-Key named this notice already: nothing new was made")


class UnsubscribedOut(BaseModel):
    """An unsubscribe link followed: the recipient no longer gets ``category`` on ``channel``."""

    unsubscribed: bool
    category: str
    channel: str
