"""What the template-SMS providers (Aliyun, Tencent) share: the options that map a record's
``noti_sms_text`` to template parameters, the phone-number forms of noti, and
:class:`TemplateSmsProvider`, their common base (the add-time check, receipts pushed to a
keyed URL or polled).

Both vendors send approved templates, never free text. A record's text is either

* a JSON object (text starting with ``{``): its values are the template parameters,
  strings as they are and numbers written out (``4321`` → ``"4321"``); anything else (null,
  true, lists, objects) is refused. With ``template_params`` set, its keys must be exactly
  those names;
* plain text: the single parameter named by ``text_param`` (refused when it is unset).

A record may name its own vendor template: its ``template`` field maps provider names to
template codes (:func:`noti.channels.sms.template_map`), and a provider whose *name* (the
``<name>`` of ``[providers.<name>]``, not its ``kind``: two accounts of one vendor have
different templates) has an entry sends that template instead of its configured one
(:func:`record_template`). ``template_params`` and ``text_param`` describe the configured
template only, so with a record's own template the text must be a JSON object, taken as it
is (no check of its names); ``param_max_chars`` still applies. Without an entry for the
provider the configured template is sent.

``template_scope`` says which numbers the configured sign and template serve: a mainland
(国内) template reaches +86 mobiles only, an international (国际/港澳台) one everything else;
the vendors refuse the other kind, so :meth:`check` refuses it before anything is stored.
noti accepts E.164 (``+8613912345678``) or an 11-digit mainland mobile (``13912345678``);
a ``+86`` number that is not a mobile can never receive an SMS.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Callable, Iterator
from typing import Literal, Self

from pydantic import Field, model_validator

from noti.channels.sms import CN_MOBILE, E164_PHONE
from noti.core.record import Channel
from noti.delivery.state import ReceiptBatch, ReceiptRequest
from noti.errors import InvalidInput, PermanentFailure
from noti.providers._lookup import LookupProvider
from noti.providers._receipts import KeyedReceiptOptions, check_key
from noti.providers._sender import SenderPoolOptions
from noti.providers.base import Message, ProviderOptions

__all__ = [
    "Destination",
    "TemplateOptions",
    "TemplateSmsOptions",
    "TemplateSmsProvider",
    "destination",
    "mask_number",
    "record_template",
    "template_values",
]

_PARAM_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class TemplateOptions(ProviderOptions):
    """Options of a provider that sends templates (see the module docstring)."""

    #: Names of the template's variables; for Tencent, in the template's order ({1}, {2}, …).
    template_params: list[str] | None = None
    #: The variable that plain (non-JSON) text fills.
    text_param: str | None = None
    #: Which numbers the sign and template serve.
    template_scope: Literal["mainland", "international"] = "mainland"
    #: Longest parameter value the account may send (e.g. 12 for a Tencent personal account).
    param_max_chars: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _params_agree(self) -> Self:
        names = self.template_params
        for name in [*(names or []), *([self.text_param] if self.text_param else [])]:
            if not _PARAM_NAME.match(name):
                raise ValueError(f"template parameter name {name!r} must be 1-64 of A-Z a-z 0-9 _ . -")
        if names is not None and len(set(names)) != len(names):
            raise ValueError(f"template_params has a name twice: {names}")
        if self.text_param and names is not None and names != [self.text_param]:
            raise ValueError(
                f"text_param {self.text_param!r} fills the template's only variable, "
                f"but template_params lists {names}"
            )
        return self

    def param_names(self) -> list[str] | None:
        """The template's variables, when known (``template_params``, else ``[text_param]``)."""
        if self.template_params is not None:
            return list(self.template_params)
        return [self.text_param] if self.text_param else None


def _bad(code: str, message: str) -> InvalidInput:
    return InvalidInput(message, code=f"e.cmd.noti.add.{code}")


def _as_string(name: str, value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and value == value and value not in (float("inf"), float("-inf")):
        return repr(value)
    raise _bad(
        "badtext",
        f"template parameter {name!r} must be a string or a number, got {json.dumps(value)[:40]}",
    )


def record_template(message: Message, provider: str) -> str | None:
    """The vendor template code ``message``'s ``template`` field names for the provider called
    ``provider``; None when it names none (the configured template is sent)."""
    chosen = message.fields.get("template")
    code = chosen.get(provider) if isinstance(chosen, dict) else None
    return code if isinstance(code, str) and code else None


def template_values(text: object, options: TemplateOptions, *, own_template: bool = False) -> dict[str, str]:
    """The template parameters of a record's SMS text, by name, in the order to send them
    (with ``own_template``, for the record's own template: a JSON object, in its order).

    Raises:
        InvalidInput: ``e.cmd.noti.add.badtext``: not valid for the configured template.
    """
    if not isinstance(text, str) or not text.strip():
        raise _bad("badtext", "an SMS needs text: a JSON object of template parameters, or plain text")
    names = None if own_template else options.param_names()
    if own_template and not text.lstrip().startswith("{"):
        raise _bad(
            "badtext",
            "with its own template (the template field) an SMS text must be a JSON object of "
            "that template's parameters (text_param names the configured template's)",
        )
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise _bad("badtext", f"SMS text starts with '{{' but is not a JSON object: {exc}") from None
        if not isinstance(data, dict):
            raise _bad("badtext", "SMS text starting with '{' must be a JSON object")
        values = {str(key): _as_string(str(key), value) for key, value in data.items()}
        if names is not None:
            missing = [n for n in names if n not in values]
            unknown = [k for k in values if k not in names]
            if missing or unknown:
                parts = []
                if missing:
                    parts.append(f"missing {', '.join(missing)}")
                if unknown:
                    parts.append(f"not in the template: {', '.join(unknown)}")
                raise _bad(
                    "badtext",
                    f"template parameters do not fit the template ({'; '.join(parts)}); "
                    f"it takes {', '.join(names) or 'none'}",
                )
            values = {n: values[n] for n in names}
    else:
        if not options.text_param:
            raise _bad(
                "badtext",
                "this provider's template takes named parameters: send a JSON object "
                f"({', '.join(names or []) or 'see the template'}), or set text_param for plain text",
            )
        values = {options.text_param: text}
    limit = options.param_max_chars
    if limit is not None:
        for name, value in values.items():
            if len(value) > limit:
                raise _bad(
                    "badtext",
                    f"template parameter {name!r} is {len(value)} characters; this account allows {limit}",
                )
    return values


Destination = tuple[Literal["mainland", "international"], str]


def destination(target: str, scope: Literal["mainland", "international"]) -> Destination:
    """``("mainland", "13912345678")`` or ``("international", "+85291234567")`` for a target.

    Raises:
        InvalidInput: ``e.cmd.noti.add.badtarget``: not a number noti accepts, a ``+86``
            number that is not a mobile, or a number the template's scope does not reach.
    """
    target = target.strip()
    if CN_MOBILE.match(target):
        kind, number = "mainland", target
    elif E164_PHONE.match(target):
        if target.startswith("+86"):
            number = target[3:]
            if not CN_MOBILE.match(number):
                raise _bad("badtarget", f"{mask_number(target)} is not a mainland mobile number")
            kind = "mainland"
        else:
            kind, number = "international", target
    else:
        raise _bad(
            "badtarget",
            f"{mask_number(target)} is not a phone number: use E.164 (+8613912345678) "
            "or an 11-digit mainland mobile number",
        )
    if kind != scope:
        raise _bad(
            "badtarget",
            f"{mask_number(target)} is {'a mainland' if kind == 'mainland' else 'an international'} "
            f"number; this provider's template is for {scope} numbers (template_scope)",
        )
    return ("mainland", number) if kind == "mainland" else ("international", number)


def mask_number(number: str) -> str:
    """A phone number fit for messages and logs (personal data), masked as the sender masks
    targets: ``+86*********78``."""
    if len(number) <= 4:
        return "*" * len(number)
    return number[:3] + "*" * max(3, len(number) - 5) + number[-2:]


@contextlib.contextmanager
def template_still_fits(provider: str) -> Iterator[None]:
    """Around building a send's request from the provider's template settings: a message that
    no longer fits them (it was checked when it was added; the settings changed since) is a
    :class:`PermanentFailure` (``vendor_code`` ``noti.template``), not a retry.

    Raises:
        PermanentFailure: the request could not be built.
    """
    try:
        yield
    except InvalidInput as exc:
        raise PermanentFailure(
            f"{provider}: {exc.message}", provider=provider, vendor_code="noti.template"
        ) from None


class TemplateSmsOptions(TemplateOptions, SenderPoolOptions, KeyedReceiptOptions):
    """The options every template-SMS provider has: the template's parameters, a sender pool
    (:mod:`noti.providers._sender`), and receipts pushed to a URL with a ``key=`` (the vendors
    sign nothing) or polled; each vendor adds its account's."""


class TemplateSmsProvider(LookupProvider):
    """The base of the template-SMS providers: what Aliyun and Tencent do alike, so that each
    vendor's module holds only what is the vendor's own (its signature, calls and answers).

    A vendor says how it writes a number (:meth:`vendor_number`) and reads a pushed receipt
    once its key was checked (:meth:`read_pushed`)."""

    channels = frozenset({Channel.SMS})
    options: TemplateSmsOptions
    #: Wall clock for the request's time stamp (tests move it to exercise the vendor's skew check).
    clock: Callable[[], float] = staticmethod(time.time)

    def vendor_number(self, kind: Literal["mainland", "international"], number: str) -> str:
        """``number`` (11 digits for a mainland mobile, E.164 otherwise) as the vendor takes it."""
        raise NotImplementedError

    def _number(self, target: str) -> str:
        kind, number = destination(target, self.options.template_scope)
        return self.vendor_number(kind, number)

    def _number_if_sendable(self, target: str) -> str | None:
        """The vendor's form of ``target``; None when the settings changed since it was sent and
        no longer take it (the send refuses it: nothing can be found by it at the vendor)."""
        try:
            return self._number(target)
        except InvalidInput:
            return None

    def template_of(self, message: Message) -> str | None:
        """The template the record names for this provider (None: the configured one)."""
        return record_template(message, self.name)

    def values(self, message: Message) -> dict[str, str]:
        """The record's template parameters (:func:`template_values`) for the template it goes
        out with.

        Raises:
            InvalidInput: ``e.cmd.noti.add.badtext``.
        """
        own = self.template_of(message) is not None
        return template_values(message.fields.get("text"), self.options, own_template=own)

    def check(self, message: Message) -> None:
        """Refuse a number or text this sign and template can never send.

        Raises:
            InvalidInput: ``e.cmd.noti.add.badtarget`` / ``.badtext``.
        """
        self._number(message.target)
        self.values(message)

    def read_receipt(self, request: ReceiptRequest) -> ReceiptBatch:
        """A pushed receipt, authenticated by the URL's ``key`` and read by :meth:`read_pushed`.

        Raises:
            ReceiptRejected: no ``receipt_key`` configured, a missing or wrong key, or a body
                that cannot be read.
        """
        check_key(request, self.options.receipt_key, self.name)
        return self.read_pushed(request)

    def read_pushed(self, request: ReceiptRequest) -> ReceiptBatch:
        """The reports of a push whose key was checked (the vendor's receipts module)."""
        raise NotImplementedError

    @property
    def polls_receipts(self) -> bool:
        """Polled when no ``receipt_key`` is configured, or when ``receipt_poll`` says so."""
        return self.options.polls()
