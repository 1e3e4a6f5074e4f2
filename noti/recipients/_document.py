"""Template documents: what :meth:`~noti.recipients.templates.TemplateStore.put` takes and
:func:`~noti.recipients.templates.load_file` reads, checked whole and compiled before
anything is stored.

::

    {"default_locale": "en",
     "description": "optional",
     "channels": {"sms":   {"en": {"text": "Order {{ order }} shipped"},
                            "zh": {"params": {"order": "{{ order }}"},
                                   "template": {"aliyun": "SMS_1234"}}},
                  "email": {"en": {"subject": "Order {{ order }}", "text": "…"}}}}

Each channel is one of the registry's (:class:`~noti.core.channel.Channel`); each of its
variants is keyed by a locale tag (:func:`~noti.recipients.locales.parse_locale`, stored in
its canonical spelling) and takes that channel's fields, and for ``sms`` also ``params``
(rendered, then JSON-encoded into ``text``: the form the Aliyun and Tencent providers read)
and ``template`` (provider name -> the vendor's template code). A variant has every field
its channel requires (``params`` stands for ``text``). Every string is a template, compiled
now, and in JSON fields every string inside; ``tmpl``, ``pnb``, ``format`` and ``template``
are passed as they are. The values that do not depend on any variable (the plain ones, and
constant templates, rendered now) are checked by the channel now, as a record's would be.
Every refusal is ``e.cmd.noti.tmpl.*`` (``.baddoc`` for the shape; ``.toobig`` for the
limits in capitals below; ``.badsyntax`` / ``.unsafe`` from the sandbox).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from noti.core.channel import Channel, ChannelSpec
from noti.core.record import parse_channel
from noti.errors import InvalidInput
from noti.inputs import check_json_shape, check_name, check_text, load_json, shown
from noti.recipients._variants import (
    BADDOC,
    TOOBIG,
    Variant,
    compile_params,
    compile_text,
    compile_tree,
    placed,
    refused,
    tree_variables,
)
from noti.recipients.locales import parse_locale

__all__ = [
    "DESCRIPTION_MAX",
    "DOC_MAX_BYTES",
    "LOCALES_MAX",
    "PLAIN_FIELDS",
    "SMS_PARAMS_MAX",
    "STRINGS_MAX",
    "VENDOR_CODE_MAX",
    "VENDOR_TEMPLATES_MAX",
    "Document",
    "compile_document",
]

#: The largest document, as compact JSON in UTF-8.
DOC_MAX_BYTES = 256 * 1024
#: The most locales (variants) one channel of a document may have.
LOCALES_MAX = 64
#: The most strings one document may hold (each template is compiled when it is put and
#: when a process first reads it: about a millisecond each).
STRINGS_MAX = 2048
DESCRIPTION_MAX = 1000
#: Fields passed to the record as they are, never rendered.
PLAIN_FIELDS = frozenset({"tmpl", "pnb", "template", "format"})
#: The keys an SMS variant takes besides the channel's fields.
SMS_KEYS = ("params", "template")
SMS_PARAMS_MAX = 32
#: ``template``: at most this many providers, each code at most this long.
VENDOR_TEMPLATES_MAX = 16
VENDOR_CODE_MAX = 64
#: A template parameter's name, as the template-SMS providers take it.
_PARAM_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}", re.ASCII)
_TOP_KEYS = ("default_locale", "description", "channels")
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class Document:
    """A checked, compiled template document."""

    #: the document as stored: compact JSON, locale tags in their canonical spelling
    text: str
    default_locale: str
    description: str
    #: channel -> locale -> its variant, in the document's order
    variants: Mapping[str, Mapping[str, Variant]]
    #: the top-level variables any variant uses
    variables: frozenset[str]


def _baddoc(message: str) -> InvalidInput:
    return refused(BADDOC, message)


def _encoded(doc: dict[str, Any]) -> str:
    try:
        text = _ENCODER.encode(doc)
    except RecursionError:
        raise _baddoc("the template document is nested too deeply") from None
    except (TypeError, ValueError) as exc:  # a date from TOML, NaN, a set
        raise _baddoc(f"the template document is not plain JSON: {exc}") from None
    try:
        size = len(text.encode())
    except UnicodeEncodeError:
        raise _baddoc("the template document holds a lone surrogate (not valid UTF-8)") from None
    if size > DOC_MAX_BYTES:
        raise refused(TOOBIG, f"the template document is {size} bytes as JSON; the limit is {DOC_MAX_BYTES}")
    return text


def _as_object(doc: object) -> dict[str, Any]:
    if isinstance(doc, str | bytes):
        if len(doc) > 4 * DOC_MAX_BYTES:
            raise refused(
                TOOBIG, f"the template document is {len(doc)} long; the limit is {DOC_MAX_BYTES} bytes"
            )
        doc = load_json(doc, what="the template document", code=BADDOC)
    if not isinstance(doc, Mapping):
        raise _baddoc(f"a template document is a JSON object, got {type(doc).__name__}")
    return dict(doc)


def _strings(value: Any) -> int:
    """How many strings ``value`` holds (keys aside): counted before any is compiled."""
    count = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            count += 1
        elif isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count


def _locale(value: object, where: str) -> str:
    try:
        return parse_locale(value)
    except InvalidInput as exc:
        raise placed(where, exc, code=BADDOC) from None


def _channel(name: str) -> Channel:
    try:
        return parse_channel(name)
    except InvalidInput as exc:
        raise placed("channels", exc, code=BADDOC) from None


def _vendor_templates(value: object, where: str) -> dict[str, str]:
    """SMS ``template``: provider name -> the vendor's template code."""
    if not isinstance(value, Mapping) or not value:
        raise _baddoc(f"{where}: a non-empty object of provider name -> the vendor's template code")
    if len(value) > VENDOR_TEMPLATES_MAX:
        raise _baddoc(f"{where}: at most {VENDOR_TEMPLATES_MAX} providers, got {len(value)}")
    for provider, vendor_code in value.items():
        check_name(provider, what=f"{where}: provider name", code=BADDOC, max_len=64, spaces=False)
        if "," in provider:
            raise _baddoc(f"{where}: provider name {shown(provider)} must not contain a comma")
        check_name(
            vendor_code, what=f"{where}.{provider}", code=BADDOC, max_len=VENDOR_CODE_MAX, spaces=False
        )
    return dict(value)


def _variant(channel: Channel, locale: str, value: object) -> Variant:
    where = f"channels.{channel}.{locale}"
    if not isinstance(value, Mapping) or not value:
        raise _baddoc(f"{where}: a variant is a non-empty object of the channel's fields")
    spec: ChannelSpec = channel.spec
    sms = channel is Channel.SMS
    allowed = [*spec.fields, *(k for k in SMS_KEYS if sms and k not in spec.fields)]
    unknown = sorted(set(value) - set(allowed))
    if unknown:
        raise _baddoc(f"{where}: {channel} takes {', '.join(allowed)}; unexpected: {', '.join(unknown)}")
    if sms and "params" in value and "text" in value:
        raise _baddoc(f"{where}: params are the SMS text: give text or params, not both")
    given = {*value, *(("text",) if sms and "params" in value else ())}
    missing = [name for name in spec.required if name not in given]
    if missing:
        raise _baddoc(f"{where}: a {channel} variant needs {', '.join(missing)}")
    fields: dict[str, Any] = {}
    plain: dict[str, Any] = {}
    params: dict[str, Any] | None = None
    for key, item in value.items():
        at = f"{where}.{key}"
        if sms and key == "params":
            params = compile_params(item, at, names=_PARAM_NAME, most=SMS_PARAMS_MAX)
        elif sms and key == "template":
            plain[key] = _vendor_templates(item, at)
        elif key in PLAIN_FIELDS:
            plain[key] = item
        elif key in spec.json_fields:
            if not isinstance(item, Mapping):
                raise _baddoc(f"{at}: a JSON object, got {type(item).__name__}")
            fields[key] = compile_tree(item, at)
        else:
            fields[key] = compile_text(item, at, html=key == "html")
    variables = tree_variables(fields) | (tree_variables(params) if params else frozenset())
    variant = Variant(channel.value, locale, fields, params, plain, variables)
    constant = {k: v for k, v in variant.constant_fields().items() if k in spec.fields}
    if constant:
        try:
            spec.check_fields(constant)
        except InvalidInput as exc:
            raise placed(where, exc, code=BADDOC) from None
    return variant


def _variants(channel: Channel, value: object) -> tuple[dict[str, Any], dict[str, Variant]]:
    """The channel's variants as stored (canonical locales) and compiled."""
    if not isinstance(value, Mapping) or not value:
        raise _baddoc(f"channels.{channel}: an object of locale -> variant, with at least one")
    if len(value) > LOCALES_MAX:
        raise refused(TOOBIG, f"channels.{channel}: at most {LOCALES_MAX} locales, got {len(value)}")
    stored: dict[str, Any] = {}
    compiled: dict[str, Variant] = {}
    for tag, variant in value.items():
        locale = _locale(tag, f"channels.{channel}")
        if locale in compiled:
            raise _baddoc(f"channels.{channel}: {tag!r} is {locale!r} again")
        compiled[locale] = _variant(channel, locale, variant)
        stored[locale] = variant
    return stored, compiled


def compile_document(doc: object) -> Document:
    """Check and compile a template document (a mapping, or its JSON text).

    Raises:
        InvalidInput: ``e.cmd.noti.tmpl.baddoc`` (its shape, a channel, field or locale),
        ``.toobig`` (a limit), ``.badsyntax`` and ``.unsafe`` (a template).
    """
    given = _as_object(doc)
    _encoded(given)
    check_json_shape(given, what="the template document", code=BADDOC)
    unknown = sorted(set(given) - set(_TOP_KEYS))
    if unknown:
        raise _baddoc(f"a template document has {', '.join(_TOP_KEYS)}; unexpected: {', '.join(unknown)}")
    if "default_locale" not in given:
        raise _baddoc("a template document needs its default_locale (en, zh-Hant …)")
    default_locale = _locale(given["default_locale"], "default_locale")
    description = given.get("description")
    if description is None or description == "":
        description = ""
    else:
        check_text(description, what="description", code=BADDOC, max_len=DESCRIPTION_MAX)
    channels = given.get("channels")
    if not isinstance(channels, Mapping) or not channels:
        raise _baddoc("a template document's channels are an object of channel -> its variants")
    strings = _strings(channels)
    if strings > STRINGS_MAX:
        raise refused(TOOBIG, f"a template document holds at most {STRINGS_MAX} strings, got {strings}")
    stored: dict[str, Any] = {}
    variants: dict[str, dict[str, Variant]] = {}
    for name, value in channels.items():
        channel = _channel(name)
        stored[channel.value], variants[channel.value] = _variants(channel, value)
    normal: dict[str, Any] = {"default_locale": default_locale}
    if description:
        normal["description"] = description
    normal["channels"] = stored
    variables = frozenset().union(*(v.variables for locales in variants.values() for v in locales.values()))
    return Document(_encoded(normal), default_locale, description, variants, variables)
