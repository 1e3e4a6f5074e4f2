"""One variant of a template (one channel's fields in one locale): its values compiled in the
listener templates' sandbox (:func:`noti.events.templates.compile_template`), and rendered
into the fields a record of that channel takes.

The sandbox's refusals come out under the templates' own codes (``e.cmd.noti.tmpl.*``):

==========================  ===========================================================
code                        when
==========================  ===========================================================
``.badsyntax``              a value is not a valid template (syntax, an unknown filter)
``.unsafe``                 the sandbox refuses it: when it is put (``{% include %}``,
                            ``__class__``) or when it runs (``'x' * 10**9``, a loop of
                            more than the step budget)
``.missingvar``             rendering met an undefined variable (named in the message)
``.toobig``                 a value longer than a template may be, or a rendering longer
                            than :data:`OUTPUT_MAX` (one value) or :data:`RENDER_MAX` (all)
``.error``                  anything else failing in a template (``{{ 1 / 0 }}``, text
                            added to a number)
==========================  ===========================================================
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from noti.errors import InvalidInput
from noti.events.limits import OUTPUT_MAX
from noti.events.templates import SOURCE_MAX, CompiledTemplate, compile_template

__all__ = [
    "BADDOC",
    "BADNAME",
    "BADSYNTAX",
    "ERROR",
    "MISSINGVAR",
    "NOCHANNEL",
    "NOLOCALE",
    "NOT_FOUND",
    "OUTPUT_MAX",
    "RENDER_MAX",
    "SOURCE_MAX",
    "TOOBIG",
    "UNSAFE",
    "Variant",
    "compile_params",
    "compile_text",
    "compile_tree",
    "placed",
    "refused",
    "tree_variables",
]

#: The templates' error codes (see the module docstring; ``.baddoc``, ``.badname``,
#: ``.nochannel``, ``.nolocale`` and ``.not_found`` are :mod:`noti.recipients.templates`').
BADNAME = "e.cmd.noti.tmpl.badname"
BADDOC = "e.cmd.noti.tmpl.baddoc"
BADSYNTAX = "e.cmd.noti.tmpl.badsyntax"
UNSAFE = "e.cmd.noti.tmpl.unsafe"
MISSINGVAR = "e.cmd.noti.tmpl.missingvar"
NOCHANNEL = "e.cmd.noti.tmpl.nochannel"
NOLOCALE = "e.cmd.noti.tmpl.nolocale"
TOOBIG = "e.cmd.noti.tmpl.toobig"
ERROR = "e.cmd.noti.tmpl.error"
NOT_FOUND = "e.cmd.noti.tmpl.not_found"
#: The most characters one rendering of a variant may produce, all its values together
#: (each value is held to :data:`OUTPUT_MAX` by the sandbox).
RENDER_MAX = 512 * 1024
#: Ours, by the last part of the sandbox's codes (``compile_template``'s, and ``render``'s
#: under the prefix :data:`_SANDBOX`, which never leaves this module).
_COMPILE_CODES = {"badtemplate": BADSYNTAX, "unsafe": UNSAFE}
_RENDER_CODES = {"undefined": MISSINGVAR, "unsafe": UNSAFE, "error": ERROR}
_SANDBOX = "sandbox"
_OUTPUT_REFUSAL = f"produced more than {OUTPUT_MAX} characters"


def refused(code: str, message: str) -> InvalidInput:
    """The refusal ``code`` (one of the codes above)."""
    return InvalidInput(message, code=code)


def placed(where: str, exc: InvalidInput, *, code: str | None = None) -> InvalidInput:
    """``exc`` with ``where`` before its message (and ``code`` instead of its own, if given)."""
    return InvalidInput(f"{where}: {exc.message}", code=code or exc.code)


def _from_sandbox(exc: InvalidInput, codes: Mapping[str, str]) -> InvalidInput:
    # the sandbox's messages name "listener templates"; here they are notification templates
    message = exc.message.replace("listener templates", "templates")
    code = codes.get(exc.code.rpartition(".")[2], ERROR)
    if code == ERROR and _OUTPUT_REFUSAL in message:
        code = TOOBIG
    return refused(code, message)


#: Wrapped around an HTML field's template: the values printed in it are HTML-escaped (a
#: customer's name ``<script>`` shows as text); ``{{ x | safe }}`` prints markup on purpose.
_ESCAPED = ("{% autoescape true %}", "{% endautoescape %}")


def compile_text(source: object, where: str, *, html: bool = False) -> CompiledTemplate:
    """One string value, compiled (``where`` names it in messages: ``channels.sms.en.text``);
    ``html``: an HTML field, its printed values escaped.

    Raises:
        InvalidInput: ``.baddoc`` (not a string), ``.toobig``, ``.badsyntax``, ``.unsafe``.
    """
    if not isinstance(source, str):
        raise refused(BADDOC, f"{where}: a template is a string, got {type(source).__name__}")
    if len(source) > SOURCE_MAX:
        raise refused(TOOBIG, f"{where}: a template is at most {SOURCE_MAX} characters, got {len(source)}")
    try:
        if html:
            return compile_template(f"{_ESCAPED[0]}{source}{_ESCAPED[1]}", where)
        return compile_template(source, where)
    except InvalidInput as exc:  # a template nested too deeply included (compile_template's)
        raise _from_sandbox(exc, _COMPILE_CODES) from None


def compile_tree(value: object, where: str) -> Any:
    """A JSON value with every string in it compiled (keys stay as they are); numbers,
    booleans and null are kept."""
    if isinstance(value, str):
        return compile_text(value, where)
    if isinstance(value, Mapping):
        return {key: compile_tree(item, f"{where}.{key}") for key, item in value.items()}
    if isinstance(value, list):
        return [compile_tree(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if value is None or isinstance(value, bool | int | float):
        return value
    raise refused(BADDOC, f"{where}: a JSON value, got {type(value).__name__}")


def compile_params(value: object, where: str, *, names: re.Pattern[str], most: int) -> dict[str, Any]:
    """An SMS ``params`` object: parameter name (``names``, a compiled pattern) -> a string
    (compiled) or a number (kept), at most ``most`` of them."""
    if not isinstance(value, Mapping) or not value:
        raise refused(BADDOC, f"{where}: the template's parameters are a non-empty object (name -> value)")
    if len(value) > most:
        raise refused(BADDOC, f"{where}: at most {most} parameters, got {len(value)}")
    out: dict[str, Any] = {}
    for key, item in value.items():
        if not names.fullmatch(key):
            raise refused(BADDOC, f"{where}: parameter name {key[:80]!r} must be 1-64 of A-Z a-z 0-9 _ . -")
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            raise refused(BADDOC, f"{where}.{key}: a parameter is a string or a number")
        out[key] = compile_text(item, f"{where}.{key}") if isinstance(item, str) else item
    return out


def tree_variables(tree: Any) -> frozenset[str]:
    """The top-level variables the templates in ``tree`` use."""
    if isinstance(tree, CompiledTemplate):
        return tree.variables
    items = tree.values() if isinstance(tree, Mapping) else tree if isinstance(tree, list) else ()
    return frozenset().union(*(tree_variables(item) for item in items))


class _Budget:
    """What is left of :data:`RENDER_MAX` in one rendering."""

    __slots__ = ("left",)

    def __init__(self) -> None:
        self.left = RENDER_MAX

    def render(self, template: CompiledTemplate, values: Mapping[str, Any]) -> str:
        try:
            text = template.render(values, prefix=_SANDBOX)
        except InvalidInput as exc:
            raise _from_sandbox(exc, _RENDER_CODES) from None
        self.left -= len(text)
        if self.left < 0:
            raise refused(TOOBIG, f"{template.where}: the rendering passed {RENDER_MAX} characters in all")
        return text


def _render_tree(tree: Any, values: Mapping[str, Any], budget: _Budget) -> Any:
    if isinstance(tree, CompiledTemplate):
        return budget.render(tree, values)
    if isinstance(tree, dict):
        return {key: _render_tree(item, values, budget) for key, item in tree.items()}
    if isinstance(tree, list):
        return [_render_tree(item, values, budget) for item in tree]
    return tree


def _encode_params(params: Mapping[str, Any]) -> str:
    # the form the template-SMS providers read from a record's text (noti.channels.sms._templates)
    return json.dumps(params, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class Variant:
    """One channel's fields in one locale, compiled."""

    channel: str
    locale: str
    #: field -> its compiled template (text fields) or compiled JSON tree (JSON fields)
    fields: Mapping[str, Any]
    #: SMS only: template parameter -> compiled template or number; rendered into ``text``
    params: Mapping[str, Any] | None
    #: fields passed as they are (``tmpl``, ``pnb``, ``format``, ``template``)
    plain: Mapping[str, Any]
    #: the top-level variables its templates use
    variables: frozenset[str]

    def render(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The channel's fields for ``values`` (text as strings, JSON fields as objects,
        ``params`` JSON-encoded into ``text``).

        Raises:
            InvalidInput: ``.missingvar``, ``.unsafe``, ``.toobig``, ``.error`` (see the module).
        """
        budget = _Budget()
        out = {name: _render_tree(tree, values, budget) for name, tree in self.fields.items()}
        if self.params is not None:
            out["text"] = _encode_params(_render_tree(self.params, values, budget))
        if self.plain:
            out.update(copy.deepcopy(dict(self.plain)))
        return out

    def constant_fields(self) -> dict[str, Any]:
        """The fields whose value does not depend on the variables, as they render (for the
        channel's own checks when the template is put).

        Raises:
            InvalidInput: as :meth:`render`: a constant that fails fails on every rendering.
        """
        budget = _Budget()
        out = {
            name: _render_tree(tree, {}, budget)
            for name, tree in self.fields.items()
            if not tree_variables(tree)
        }
        if self.params is not None and not tree_variables(self.params):
            out["text"] = _encode_params(_render_tree(self.params, {}, budget))
        out.update(self.plain)
        return out
