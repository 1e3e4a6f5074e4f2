"""Named, versioned templates per user: one message in every channel and language it is sent
in, stored in Redis, checked whole when it is put, rendered per channel and locale.

::

    store = TemplateStore(runtime.redis, runtime.keys)
    store.put("alice", "order_shipped", {"default_locale": "en", "channels": {
        "sms": {"en": {"text": "Order {{ order }} shipped"},
                "zh-Hant": {"text": "訂單 {{ order }} 已發貨"}}}})             # -> 1
    template = store.get("alice", "order_shipped")
    locale = template.locale_for("sms", "zh-Hant-TW")                          # "zh-Hant"
    template.render("sms", locale, {"order": 7})       # {"text": "訂單 7 已發貨"}

The document (what ``put`` takes and template files hold) and its checks are
:mod:`noti.recipients._document`'s; the variables a template sees are what the caller
passes to :meth:`Template.render` (``notify(recipient=…)``: the call's ``data`` at the top
level, ``recipient``, ``unsubscribe_url``, ``locale``); rendering runs in the listener
templates' sandbox (:mod:`noti.events.templates`), its refusals under ``e.cmd.noti.tmpl.*``
(:mod:`noti.recipients._variants`).

**Versions.** Each ``put`` writes version current + 1 (the first is 1) and makes it current,
in one script (``template_put.lua``); a version's document never changes once written, and
old versions stay readable until the template is deleted (which removes them all; a
template put again under that name starts at 1). In Redis (``noti.core.keys``):
``noti:tmpl:<owner>:<name>`` HASH (``current``, ``v<N>``, ``ct``, ``lm``) and
``noti:tmpls:<owner>`` ZSET of names by created ms.

**The cache.** A process keeps the templates it compiled (at most :data:`CACHE_ENTRIES`, and
at most :data:`CACHE_CHARS` characters of their documents, least recently used dropped
first), keyed by key prefix, owner, name and version. :meth:`TemplateStore.get` reads the
version's document in one round trip (``template_get.lua``) and uses the compiled one when
its document is the same text; :meth:`TemplateStore.cached` answers from the cache alone.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import redis

from noti.core.keys import Keys
from noti.core.record import now_ms
from noti.errors import InvalidInput, NotFound
from noti.inputs import load_json, shown, user_name
from noti.recipients._cache import LruCache
from noti.recipients._document import DOC_MAX_BYTES, Document, compile_document
from noti.recipients._variants import (
    BADDOC,
    BADNAME,
    NOCHANNEL,
    NOLOCALE,
    NOT_FOUND,
    TOOBIG,
    Variant,
    placed,
    refused,
)
from noti.recipients.locales import fallback_chain, parse_locale
from noti.redis.conn import load_script
from noti.redis.outage import translate_errors

__all__ = [
    "CACHE_CHARS",
    "CACHE_ENTRIES",
    "FILE_MAX_BYTES",
    "TEMPLATE_NAME",
    "Template",
    "TemplateInfo",
    "TemplateStore",
    "check_document",
    "check_template_name",
    "load_file",
]

#: A template's name (a Redis key's suffix, a file's stem).
TEMPLATE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}", re.ASCII)
#: The most compiled templates a process keeps, and the most characters of their documents.
CACHE_ENTRIES = 256
CACHE_CHARS = 16 * 1024 * 1024
#: The largest template file :func:`load_file` reads (comments and white space included).
FILE_MAX_BYTES = 4 * DOC_MAX_BYTES


def check_template_name(value: object) -> str:
    """``value`` when it is a template name (:data:`TEMPLATE_NAME`).

    Raises:
        InvalidInput: ``e.cmd.noti.tmpl.badname``.
    """
    if not isinstance(value, str) or not TEMPLATE_NAME.fullmatch(value):
        raise refused(
            BADNAME,
            f"a template name is a letter or digit then up to 127 of A-Z a-z 0-9 _ . -, got {shown(value)}",
        )
    return value


def check_document(doc: object) -> dict[str, Any]:
    """A template document (a mapping, or its JSON text) checked and compiled as
    :meth:`TemplateStore.put` would, storing nothing: the document as it would be stored.

    Raises:
        InvalidInput: ``e.cmd.noti.tmpl.*`` (see :mod:`noti.recipients._document`).
    """
    return cast(dict[str, Any], json.loads(compile_document(doc).text))


@dataclass(frozen=True, slots=True, eq=False)
class Template:
    """One version of a template, compiled: what :meth:`TemplateStore.get` returns. One
    object per (owner, name, version) in a process while it is cached."""

    owner: str
    name: str
    version: int
    default_locale: str
    #: the channels it has variants for, in the document's order
    channels: tuple[str, ...]
    #: the top-level variables any of its variants uses
    variables: frozenset[str]
    description: str
    created_ms: int
    #: the stored document (JSON text)
    source: str = field(repr=False)
    variants: Mapping[str, Mapping[str, Variant]] = field(repr=False)

    @classmethod
    def build(cls, owner: str, name: str, version: int, created_ms: int, document: Document) -> Template:
        """Version ``version`` of ``owner``'s template ``name``, from its compiled document."""
        return cls(
            owner,
            name,
            version,
            document.default_locale,
            tuple(document.variants),
            document.variables,
            document.description,
            created_ms,
            document.text,
            document.variants,
        )

    def locales(self, channel: str) -> tuple[str, ...]:
        """The locales ``channel`` has variants in (none when it has no variant)."""
        return tuple(self.variants.get(str(channel), ()))

    def locale_for(self, channel: str, wanted: str | None) -> str | None:
        """The variant of ``channel`` to send to someone who reads ``wanted``: the first of
        its fallback chain (``zh-Hant-TW``, ``zh-Hant``, ``zh``) the template has, else the
        first of the default locale's chain (all a ``wanted`` of None or ``""`` gets), else
        None (also when the template has no ``channel`` variant).

        Raises:
            InvalidInput: ``e.cmd.noti.rcpt.badlocale``: ``wanted`` is not a locale tag.
        """
        variants = self.variants.get(str(channel))
        if not variants:
            return None
        chain = fallback_chain(wanted) if wanted else ()
        for tag in (*chain, *fallback_chain(self.default_locale)):
            if tag in variants:
                return tag
        return None

    def render(self, channel: str, locale: str, values: Mapping[str, Any]) -> dict[str, Any]:
        """The fields of ``channel``'s variant in ``locale`` (as :meth:`locale_for` names it)
        for ``values``: ready for the record builder, which checks them as any record's
        (text fields as strings, JSON fields as objects, SMS ``params`` JSON-encoded into
        ``text``, ``template`` as the vendor codes). ``values`` gets ``locale`` (the
        variant's) unless it has one.

        Raises:
            InvalidInput: ``e.cmd.noti.tmpl.nochannel`` / ``.nolocale`` (no such variant),
                ``.missingvar`` (naming the variable), ``.unsafe``, ``.toobig``, ``.error``.
        """
        variants = self.variants.get(str(channel))
        if variants is None:
            raise refused(
                NOCHANNEL,
                f"template {self.name!r} v{self.version} has no {shown(channel)} variant "
                f"(it has {', '.join(self.channels)})",
            )
        variant = variants.get(locale)
        if variant is None:
            try:
                variant = variants.get(parse_locale(locale))
            except InvalidInput:
                variant = None
        if variant is None:
            raise refused(
                NOLOCALE,
                f"template {self.name!r} v{self.version} has no {channel} variant in {shown(locale)} "
                f"(it has {', '.join(variants)})",
            )
        context = values
        if "locale" not in values:  # (a notice's values have it: not copied again)
            context = {**values, "locale": variant.locale}
        try:
            return variant.render(context)
        except InvalidInput as exc:
            raise placed(f"template {self.name!r} v{self.version}", exc) from None

    def document(self) -> dict[str, Any]:
        """The stored document (a fresh copy)."""
        return cast(dict[str, Any], json.loads(self.source))

    def to_dict(self) -> dict[str, Any]:
        """The template as JSON shows it (``noti template get -json``, the HTTP API)."""
        return {
            "name": self.name,
            "version": self.version,
            "default_locale": self.default_locale,
            "channels": list(self.channels),
            "description": self.description,
            "created_ms": self.created_ms,
            "document": self.document(),
        }


@dataclass(frozen=True, slots=True)
class TemplateInfo:
    """A template as :meth:`TemplateStore.list` shows it: its current version's channels
    and locales."""

    name: str
    version: int
    channels: tuple[str, ...]
    #: every locale of any channel, sorted
    locales: tuple[str, ...]
    default_locale: str
    description: str
    created_ms: int
    modified_ms: int


#: The compiled templates of this process, by (key prefix, owner, name, version); sized by
#: their documents' length.
_CACHE: LruCache[tuple[str, str, str, int], Template] = LruCache(CACHE_ENTRIES, CACHE_CHARS)


def _not_found(message: str) -> NotFound:
    return NotFound(message, code=NOT_FOUND)


def _version(value: object) -> int | None:
    """A version number asked for (an int, or a string of digits), or None for anything
    that cannot be one."""
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 18:
        value = int(value)
    if type(value) is int and 1 <= value < 2**63:
        return value
    return None


def _could_be(owner: object, name: object) -> bool:
    try:
        user_name(owner)
    except InvalidInput:
        return False
    return isinstance(name, str) and TEMPLATE_NAME.fullmatch(name) is not None


class TemplateStore:
    """The templates of one key prefix (see the module docstring)."""

    def __init__(self, redis: redis.Redis, keys: Keys) -> None:
        self.redis = redis
        self.keys = keys
        self._put = load_script(redis, "template_put", package="noti.recipients")
        self._get = load_script(redis, "template_get", package="noti.recipients")

    def put(self, owner: str, name: str, doc: object) -> int:
        """Store ``doc`` as the next version of ``owner``'s template ``name`` and make it
        current; its number (the first is 1).

        Raises:
            InvalidInput: ``e.cmd.noti.baduser`` (``owner``), ``e.cmd.noti.tmpl.badname``,
            ``e.cmd.noti.tmpl.*`` (the document: :mod:`noti.recipients._document`);
            nothing is stored.
            StoreUnavailable: Redis cannot be reached.
        """
        user_name(owner)
        check_template_name(name)
        try:
            document = compile_document(doc)
        except InvalidInput as exc:
            raise placed(f"template {name!r}", exc) from None
        with translate_errors(self.redis):
            version, created = self._put(
                keys=[self.keys.template(owner, name), self.keys.templates(owner)],
                args=[name, document.text, now_ms()],
            )
        version = int(version)
        template = Template.build(owner, name, version, int(created), document)
        _CACHE.put((self.keys.prefix, owner, name, version), template, len(template.source))
        return version

    def get(self, owner: str, name: str, version: int | None = None) -> Template:
        """Version ``version`` of ``owner``'s template ``name`` (the current one when None),
        compiled (from the process's cache when it holds that very document).

        Raises:
            NotFound: ``e.cmd.noti.tmpl.not_found``: no such template or version.
            InvalidInput: ``e.cmd.noti.tmpl.baddoc``: the stored document no longer passes
            (a channel it names is no longer installed).
            StoreUnavailable: Redis cannot be reached.
        """
        number = _version(version) if version is not None else None
        if not _could_be(owner, name) or (version is not None and number is None):
            raise _not_found(f"{shown(owner)} has no template {shown(name)} version {shown(version)}")
        with translate_errors(self.redis):
            found = self._get(keys=[self.keys.template(owner, name)], args=[number or ""])
        if not found:
            raise _not_found(f"{owner} has no template {name!r}")
        if found[3] is None:
            raise _not_found(f"{owner}'s template {name!r} has no version {number}")
        return self._compiled(owner, name, int(found[0]), int(found[1]), found[3])

    def _compiled(self, owner: str, name: str, version: int, created_ms: int, text: str) -> Template:
        key = (self.keys.prefix, owner, name, version)
        held = _CACHE.get(key)
        if held is not None and held.created_ms == created_ms and held.source == text:
            return held
        try:
            document = compile_document(text)
        except InvalidInput as exc:
            raise placed(f"template {name!r} v{version} as stored", exc) from None
        template = Template.build(owner, name, version, created_ms, document)
        _CACHE.put(key, template, len(template.source))
        return template

    def current_version(self, owner: str, name: str) -> int | None:
        """The current version of ``owner``'s template ``name``, None when there is none."""
        if not _could_be(owner, name):
            return None
        with translate_errors(self.redis):
            current = self.redis.hget(self.keys.template(owner, name), "current")
        return int(cast(str, current)) if current is not None else None

    def cached(self, owner: str, name: str, version: int) -> Template | None:
        """Version ``version`` of the template if this process holds it compiled; never asks
        Redis (a template deleted and put again meanwhile starts its versions at 1 again:
        :meth:`get` checks the document, this does not)."""
        return _CACHE.get((self.keys.prefix, owner, name, version))

    def list(self, owner: str) -> list[TemplateInfo]:
        """``owner``'s templates, oldest first, as their current versions show them."""
        try:
            user_name(owner)
        except InvalidInput:
            return []
        with translate_errors(self.redis):
            names = cast(list[str], self.redis.zrange(self.keys.templates(owner), 0, -1))
            pipe = self.redis.pipeline(transaction=False)
            for name in names:
                self._get(keys=[self.keys.template(owner, name)], args=[""], client=pipe)
            rows = pipe.execute() if names else []
        found = []
        for name, row in zip(names, rows, strict=True):
            if not row or row[3] is None:  # deleted meanwhile
                continue
            doc = json.loads(row[3])
            channels: dict[str, dict[str, Any]] = doc["channels"]
            found.append(
                TemplateInfo(
                    name,
                    int(row[0]),
                    tuple(channels),
                    tuple(sorted({locale for variants in channels.values() for locale in variants})),
                    doc["default_locale"],
                    doc.get("description", ""),
                    int(row[1]),
                    int(row[2]),
                )
            )
        return found

    def delete(self, owner: str, name: str) -> bool:
        """Remove ``owner``'s template ``name`` and every version of it; False when there
        was none."""
        if not _could_be(owner, name):
            return False
        with translate_errors(self.redis):
            pipe = self.redis.pipeline(transaction=True)
            pipe.delete(self.keys.template(owner, name))
            pipe.zrem(self.keys.templates(owner), name)
            deleted, _ = pipe.execute()
        _CACHE.drop_where((self.keys.prefix, owner, name))
        return bool(deleted)


def load_file(path: str | os.PathLike[str]) -> tuple[str, dict[str, Any]]:
    """A template file: ``<name>.json`` or ``<name>.toml`` -> ``(name, document)``. The
    document is read, not checked (:meth:`TemplateStore.put` and :func:`check_document`
    check it).

    Raises:
        InvalidInput: ``e.cmd.noti.tmpl.badname`` (the file's name), ``.toobig`` (over
            :data:`FILE_MAX_BYTES`), ``.baddoc`` (another suffix, unreadable, not JSON or TOML,
            not an object).
    """
    file = Path(path)
    suffix = file.suffix.lower()
    if suffix not in (".json", ".toml"):
        raise refused(BADDOC, f"{file}: a template file is <name>.json or <name>.toml")
    name = check_template_name(file.stem)
    try:
        with file.open("rb") as stream:
            data = stream.read(FILE_MAX_BYTES + 1)
    except OSError as exc:
        raise refused(BADDOC, f"{file}: cannot be read: {exc.strerror or exc}") from None
    if len(data) > FILE_MAX_BYTES:
        raise refused(TOOBIG, f"{file}: a template file is at most {FILE_MAX_BYTES} bytes")
    doc: object
    if suffix == ".json":
        doc = load_json(data, what=str(file), code=BADDOC)
    else:
        try:
            doc = tomllib.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise refused(BADDOC, f"{file} is not valid TOML: {exc}") from None
    if not isinstance(doc, dict):
        raise refused(BADDOC, f"{file}: a template document is an object, got {type(doc).__name__}")
    return name, doc
