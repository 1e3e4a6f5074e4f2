"""Listener templates: Jinja2 in an immutable sandbox, compiled and checked when a listener
is added, rendered against each event's payload by the processor.

A template sees the payload's top-level keys as variables (``{{ customer.phone }}``,
``Order {{ id }} paid``) and ``_event`` (``id``, ``name``, ``user``, ``created_ms``).
Undefined variables are errors, never empty strings (``StrictUndefined``): use
``{{ x | default('') }}`` or ``{% if x is defined %}`` for optional values.

What the sandbox refuses: any attribute or item whose name starts with ``_`` (refused at
``add_listener`` when written in the template, and at render time when computed),
methods that change a value (``dict.update``, ``list.append``), ``include`` / ``import`` /
``extends``, ``range`` over more than :data:`RANGE_MAX` items, repetition (``*``) and powers
(``**``) that would build huge values, and output over :data:`OUTPUT_MAX` characters.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from jinja2 import StrictUndefined, Template, TemplateError, UndefinedError, meta, nodes
from jinja2.exceptions import SecurityError
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment

from noti.errors import InvalidInput

__all__ = ["EVENT_VAR", "CompiledFilter", "CompiledTemplate", "compile_filter", "compile_template", "context"]

#: The variable holding the event's own fields (id, name, user, created_ms).
EVENT_VAR = "_event"
#: Longest text one template may produce.
OUTPUT_MAX = 64 * 1024
#: Longest ``range()`` a template may loop over.
RANGE_MAX = 1000
#: Largest exponent ``**`` accepts.
POWER_MAX = 100
SOURCE_MAX = 16 * 1024

#: The codes of render failures; at add time (with an example payload) the prefix is
#: ``e.noti.listener`` instead of ``e.noti.event.template``.
RUNTIME_PREFIX = "e.noti.event.template"
ADD_PREFIX = "e.noti.listener"


class _Sandbox(ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        if operator == "**" and isinstance(right, int | float) and abs(right) > POWER_MAX:
            raise SecurityError(f"exponents above {POWER_MAX} are not allowed in templates")
        if operator == "*":
            for seq, times in ((left, right), (right, left)):
                if isinstance(seq, str | list | tuple) and isinstance(times, int):
                    if len(seq) * times > OUTPUT_MAX:
                        raise SecurityError(f"repetition beyond {OUTPUT_MAX} items is not allowed")
        return super().call_binop(context, operator, left, right)

    def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
        # Refuse at the point of access; the default returns an undefined value whose later
        # use reports a confusing "no attribute" error instead.
        raise SecurityError(f"access to attribute {attribute!r} of a {type(obj).__name__!r} value is unsafe")


def _small_range(*args: int) -> range:
    values = range(*args)
    if len(values) > RANGE_MAX:
        raise SecurityError(f"range() of more than {RANGE_MAX} items is not allowed in templates")
    return values


def _environment() -> _Sandbox:
    env = _Sandbox(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
    env.globals["range"] = _small_range
    return env


_ENV = _environment()


def _static_problems(tree: nodes.Template) -> str | None:
    """Why ``tree`` is refused before it ever runs, or None."""
    for node in tree.find_all((nodes.Include, nodes.Extends, nodes.Import, nodes.FromImport)):
        return f"{type(node).__name__.lower()} is not allowed in listener templates"
    for getattr_node in tree.find_all(nodes.Getattr):
        if getattr_node.attr.startswith("_"):
            return f"attribute {getattr_node.attr!r} is not allowed (names starting with _ are private)"
    for getitem in tree.find_all(nodes.Getitem):
        arg = getitem.arg
        if isinstance(arg, nodes.Const) and isinstance(arg.value, str) and arg.value.startswith("_"):
            return f"item {arg.value!r} is not allowed (names starting with _ are private)"
    return None


def _parse(source: str, where: str, *, as_expression: bool) -> tuple[nodes.Template, frozenset[str]]:
    if len(source) > SOURCE_MAX:
        raise InvalidInput(
            f"{where}: a template is at most {SOURCE_MAX} characters", code="e.noti.listener.badtemplate"
        )
    text = "{{ (" + source + ") }}" if as_expression else source
    try:
        tree = _ENV.parse(text)
    except TemplateError as exc:
        raise InvalidInput(f"{where}: {_describe(exc)}", code="e.noti.listener.badtemplate") from None
    problem = _static_problems(tree)
    if problem:
        raise InvalidInput(f"{where}: {problem}", code="e.noti.listener.unsafe")
    return tree, frozenset(meta.find_undeclared_variables(tree))


def _describe(exc: Exception) -> str:
    lineno = getattr(exc, "lineno", None)
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return f"line {lineno}: {message}" if lineno else message


def _render_error(exc: Exception, where: str, prefix: str) -> InvalidInput:
    if isinstance(exc, SecurityError):
        return InvalidInput(f"{where}: {_describe(exc)}", code=f"{prefix}.unsafe")
    if isinstance(exc, UndefinedError):
        return InvalidInput(f"{where}: {_describe(exc)}", code=f"{prefix}.undefined")
    return InvalidInput(f"{where}: {type(exc).__name__}: {_describe(exc)}", code=f"{prefix}.error")


@dataclass(frozen=True, slots=True)
class CompiledTemplate:
    """A checked template and the top-level variables it uses."""

    source: str
    where: str
    template: Template
    variables: frozenset[str]

    def render(self, values: Mapping[str, Any], *, prefix: str = RUNTIME_PREFIX) -> str:
        """The text for ``values`` (see :func:`context`).

        Raises:
            InvalidInput: ``<prefix>.undefined`` (a variable the payload lacks), ``.unsafe``
            (the sandbox refused), ``.error`` (anything else going wrong in the template).
        """
        try:
            text = self.template.render(values)
        except Exception as exc:  # noqa: BLE001 - any template failure is reported the same way
            raise _render_error(exc, self.where, prefix) from None
        if len(text) > OUTPUT_MAX:
            raise InvalidInput(
                f"{self.where}: the template produced {len(text)} characters, more than {OUTPUT_MAX}",
                code=f"{prefix}.error",
            )
        return text


@dataclass(frozen=True, slots=True)
class CompiledFilter:
    """A checked filter expression: the listener runs only when it is true."""

    source: str
    expression: Callable[..., Any]
    variables: frozenset[str]

    def test(self, values: Mapping[str, Any], *, prefix: str = RUNTIME_PREFIX) -> bool:
        """Is the filter true for ``values``?

        Raises:
            InvalidInput: as :meth:`CompiledTemplate.render`.
        """
        try:
            return bool(self.expression(**values))
        except Exception as exc:  # noqa: BLE001
            raise _render_error(exc, "filter", prefix) from None


def compile_template(source: object, where: str) -> CompiledTemplate:
    """Check and compile one template; ``where`` names it in error messages (``field 'text'``).

    Raises:
        InvalidInput: ``e.noti.listener.badtemplate`` (not a string, too long, a syntax
        error), ``e.noti.listener.unsafe`` (private names, include/import/extends).
    """
    if not isinstance(source, str):
        raise InvalidInput(
            f"{where}: a template is a string, got {type(source).__name__}",
            code="e.noti.listener.badtemplate",
        )
    _, variables = _parse(source, where, as_expression=False)
    return CompiledTemplate(source, where, _ENV.from_string(source), variables)


def compile_filter(source: object) -> CompiledFilter:
    """Check and compile a filter expression (``total > 100 and customer.vip``).

    Raises:
        InvalidInput: ``e.noti.listener.badfilter`` (syntax), ``e.noti.listener.unsafe``.
    """
    if not isinstance(source, str) or not source.strip():
        raise InvalidInput("a filter is a non-empty Jinja expression", code="e.noti.listener.badfilter")
    try:
        expression = _ENV.compile_expression(source, undefined_to_none=False)
    except TemplateError as exc:
        raise InvalidInput(f"filter: {_describe(exc)}", code="e.noti.listener.badfilter") from None
    _, variables = _parse(source, "filter", as_expression=True)
    return CompiledFilter(source, expression, variables)


def context(
    payload: Mapping[str, Any], *, event_id: str, name: str, user: str, created_ms: int
) -> dict[str, Any]:
    """The variables templates see for one event."""
    values = dict(payload)
    values[EVENT_VAR] = {"id": event_id, "name": name, "user": user, "created_ms": created_ms}
    return values
