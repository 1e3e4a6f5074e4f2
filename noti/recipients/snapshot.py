"""What a notice is made from: the recipient's profile, the category and the template, as
read, and kept in this process so the next notice to the same recipient need not read them.

A kept value is never trusted blindly: ``notify.lua`` compares each one's stamp with Redis in
the step that writes the notice (the profile's version ``v``, bumped by every profile write;
the template's ``current`` version and ``ct``, which a template deleted and put again changes;
the category's stored text) and answers the fresh values when one changed; the notice is then
made again from them. So a notice to a recipient seen recently costs one round trip, a new one
two, and none is ever made from a stale profile, template or category.

Measured reason (bench scenario 19, ``notify(recipient=…)`` against ``notify_sms``): the read
round trip alone was a third of a notice's time on loopback Redis.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from noti.core.keys import Keys
from noti.errors import NotFound
from noti.inputs import shown
from noti.recipients._cache import LruCache
from noti.recipients.categories import GENERAL, Category
from noti.recipients.profile import Recipient
from noti.recipients.request import NoticeRequest
from noti.recipients.templates import Template, TemplateStore

__all__ = ["NO_CHECK", "Snapshot", "Snapshots"]

#: Profiles and template stamps kept per process (least recently used dropped).
PROFILES_KEPT = 4096
TEMPLATES_KEPT = 1024
CATEGORIES_KEPT = 1024
#: The stamp ``notify.lua`` is told not to check (a template version named by the caller).
NO_CHECK = "\x00"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A notice's inputs and their stamps (see the module)."""

    profile: Recipient
    #: The profile's ``v`` (``"0"`` for a profile written before versions were kept).
    profile_version: str
    category: Category
    #: The category's stored text ("" when it is the implicit :data:`GENERAL`).
    category_text: str
    template: Template
    #: ``"<current> <ct>"`` of the template, or :data:`NO_CHECK` when the caller named a version.
    template_stamp: str
    #: What a template sees as ``recipient`` (:meth:`Recipient.template_view`), made once per
    #: kept profile: the templates' sandbox is immutable, so every notice may share it.
    view: dict[str, Any]


class Snapshots:
    """The kept values of one process (per notifier) and the reads that refresh them."""

    def __init__(self, keys: Keys, templates: TemplateStore) -> None:
        self.keys = keys
        self.templates = templates
        # bounded by their number of entries (each counts 1); thread-safe: a worker's threads
        # make notices through one process notifier
        self._profiles: LruCache[tuple[str, str], tuple[str, Recipient, dict[str, Any]]] = LruCache(
            PROFILES_KEPT, PROFILES_KEPT
        )
        self._stamps: LruCache[tuple[str, str], str] = LruCache(TEMPLATES_KEPT, TEMPLATES_KEPT)
        self._categories: LruCache[str, tuple[str, Category]] = LruCache(CATEGORIES_KEPT, CATEGORIES_KEPT)

    def kept(self, request: NoticeRequest) -> Snapshot | None:
        """The snapshot made from kept values only (no I/O), or None when one is missing."""
        profile = self._profiles.get((request.owner, request.rid))
        category = self._categories.get(request.category)
        if profile is None or category is None:
            return None
        if request.version is None:
            stamp = self._stamps.get((request.owner, request.template))
            if stamp is None:
                return None
            version = int(stamp.split(" ", 1)[0])
        else:
            stamp, version = NO_CHECK, request.version
        template = self.templates.cached(request.owner, request.template, version)
        if template is None:
            return None
        return Snapshot(profile[1], profile[0], category[1], category[0], template, stamp, profile[2])

    def queue_reads(self, pipe: Any, request: NoticeRequest) -> None:
        """The three reads a snapshot needs, queued on ``pipe`` (one round trip for any number
        of notices): the profile and its version, the template's stamp, the category."""
        k = self.keys
        pipe.hmget(k.recipient(request.owner, request.rid), "doc", "v")
        pipe.hmget(k.template(request.owner, request.template), "current", "ct")
        pipe.hget(k.categories, request.category)

    def from_reads(self, request: NoticeRequest, profile: Any, stamp: Any, category: Any) -> Snapshot:
        """A snapshot from what :meth:`queue_reads` read (or ``notify.lua`` answered), kept.

        Raises:
            NotFound: no such recipient, category or template.
        """
        doc, version = profile
        if doc is None:
            raise NotFound(f"no recipient {shown(request.rid)}", code="e.cmd.noti.rcpt.not_found")
        if category is None and request.category != GENERAL:
            raise NotFound(f"no category {shown(request.category)}", code="e.cmd.noti.cat.not_found")
        current, created = stamp
        recipient = Recipient.from_json(doc)
        view = recipient.template_view()
        kept_category = Category.from_json(request.category, category)
        self._profiles.put((request.owner, request.rid), (str(version or "0"), recipient, view), 1)
        self._categories.put(request.category, (category or "", kept_category), 1)
        if request.version is None:
            if current is None:
                raise NotFound(f"no template {shown(request.template)}", code="e.cmd.noti.tmpl.not_found")
            template_stamp = f"{current} {created or ''}"
            self._stamps.put((request.owner, request.template), template_stamp, 1)
            version_wanted = int(current)
        else:
            template_stamp, version_wanted = NO_CHECK, request.version
        template = self.templates.cached(
            request.owner, request.template, version_wanted
        ) or self.templates.get(request.owner, request.template, version_wanted)
        return Snapshot(
            recipient, str(version or "0"), kept_category, category or "", template, template_stamp, view
        )
