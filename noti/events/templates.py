"""Listener templates: Jinja2 in an immutable sandbox, compiled and checked when a listener
is added, rendered against each event's payload by the processor. The sandbox itself is
:mod:`noti.events.sandbox`; the limits it keeps, and the checks that keep them,
:mod:`noti.events.limits`.

A template sees the payload's top-level keys as variables (``{{ customer.phone }}``,
``Order {{ id }} paid``) and ``_event`` (``id``, ``name``, ``user``, ``created_ms``).
Undefined variables are errors, never empty strings (``StrictUndefined``): use
``{{ x | default('') }}`` or ``{% if x is defined %}`` for optional values.

What the sandbox refuses (the limits in capitals are :mod:`noti.events.limits`'s), at
``add_listener`` when it is written in the template, else when it would happen (recorded on
the event as ``e.noti.event.template.unsafe``):

* any attribute or item whose name starts with ``_``, and methods that change a value
  (``dict.update``, ``list.append``);
* ``include`` / ``import`` / ``extends``, and the blocks that buffer text out of sight of
  the output limit: ``macro``, ``call``, ``filter`` blocks, ``set`` blocks, ``block``;
* ``lipsum``, ``cycler``, ``joiner`` and the ``pprint`` filter (not available);
* anything that would build a value longer than ``OUTPUT_MAX`` characters, refused
  *before* it is built: widths, counts and padding above it (``center``, ``indent``,
  ``wordwrap``, ``truncate``, ``batch``, ``slice``, ``str.ljust``/``rjust``/``zfill``,
  format widths and precisions in ``format``, ``%`` and ``str.format``), and results above
  it (repetition ``*``, concatenation ``+`` and ``~``, ``replace``, ``join``, ``indent``,
  ``wordwrap``, ``format``, ``tojson``, printing or stringifying a large list);
  ``str.translate`` and ``str.encode``;
* ``range`` over more than ``RANGE_MAX`` items, integers above ``INT_BITS_MAX``
  bits (``*``, ``**``) and exponents above ``POWER_MAX``;
* more than ``STEPS_MAX`` loop iterations and calls in one rendering;
* output over ``OUTPUT_MAX`` characters (counted as it is produced).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import dataclass
from typing import Any, cast

from jinja2 import Template, TemplateError, UndefinedError, meta, nodes
from jinja2.exceptions import SecurityError

from noti.errors import InvalidInput
from noti.events.limits import OUTPUT_MAX, STEPS, Steps
from noti.events.sandbox import (
    ENV,
    LOOP_FILTER,
    REFUSED_METHODS,
    REMOVED_FILTERS,
    REMOVED_GLOBALS,
    WIDTH_METHODS,
)

__all__ = ["EVENT_VAR", "CompiledFilter", "CompiledTemplate", "compile_filter", "compile_template", "context"]

#: The variable holding the event's own fields (id, name, user, created_ms).
EVENT_VAR = "_event"
SOURCE_MAX = 16 * 1024

#: The codes of render failures; at add time (with an example payload) the prefix is
#: ``e.noti.listener`` instead of ``e.noti.event.template``.
RUNTIME_PREFIX = "e.noti.event.template"
ADD_PREFIX = "e.noti.listener"
#: Filters whose numeric arguments are widths or counts.
_WIDTH_FILTERS = frozenset({"center", "indent", "wordwrap", "truncate", "batch", "slice", "tojson"})
#: The blocks that buffer text out of sight of the output limit.
_BUFFERING = {
    nodes.Macro: "{% macro %}",
    nodes.CallBlock: "{% call %}",
    nodes.FilterBlock: "{% filter %}",
    nodes.AssignBlock: "{% set %}…{% endset %}",
    nodes.Block: "{% block %}",
}


# --- checking and compiling ---------------------------------------------------------------------


def _big_constant(args: Iterable[nodes.Node]) -> int | None:
    for arg in args:
        value = arg.value if isinstance(arg, nodes.Keyword) else arg
        if isinstance(value, nodes.Const) and isinstance(value.value, int) and abs(value.value) > OUTPUT_MAX:
            return int(value.value)
    return None


def _static_problems(tree: nodes.Template) -> str | None:
    """Why ``tree`` is refused before it ever runs, or None."""
    for node in tree.find_all((nodes.Include, nodes.Extends, nodes.Import, nodes.FromImport)):
        return f"{type(node).__name__.lower()} is not allowed in listener templates"
    for kind, shown in _BUFFERING.items():
        for _ in tree.find_all(kind):
            return f"{shown} is not allowed in listener templates"
    for getattr_node in tree.find_all(nodes.Getattr):
        if getattr_node.attr.startswith("_"):
            return f"attribute {getattr_node.attr!r} is not allowed (names starting with _ are private)"
        if getattr_node.attr in REFUSED_METHODS:
            return f"the method {getattr_node.attr!r} is not allowed in listener templates"
    for getitem in tree.find_all(nodes.Getitem):
        arg = getitem.arg
        if isinstance(arg, nodes.Const) and isinstance(arg.value, str) and arg.value.startswith("_"):
            return f"item {arg.value!r} is not allowed (names starting with _ are private)"
    for call in tree.find_all(nodes.Call):
        if isinstance(call.node, nodes.Name) and call.node.name in REMOVED_GLOBALS:
            return f"{call.node.name}() is not available in listener templates"
        if isinstance(call.node, nodes.Getattr) and call.node.attr in WIDTH_METHODS:
            big = _big_constant([*call.args, *call.kwargs])
            if big is not None:
                return f"{call.node.attr}(): {big} is above the limit of {OUTPUT_MAX}"
    for flt in tree.find_all(nodes.Filter):
        if flt.name in REMOVED_FILTERS:
            return f"the filter {flt.name!r} is not available in listener templates"
        if flt.name in _WIDTH_FILTERS:
            big = _big_constant([*flt.args, *flt.kwargs])
            if big is not None:
                return f"{flt.name}: {big} is above the limit of {OUTPUT_MAX}"
    return None


def _budget_loops(tree: nodes.Template) -> nodes.Template:
    """Make every ``{% for %}`` loop count its iterations against
    :data:`~noti.events.limits.STEPS_MAX`."""
    for loop in tree.find_all(nodes.For):
        counted = nodes.Filter(loop.iter, LOOP_FILTER, [], [], None, None, lineno=loop.iter.lineno)
        loop.iter = counted.set_environment(ENV)
    return tree


def _parse(source: str, where: str, *, as_expression: bool) -> tuple[nodes.Template, frozenset[str]]:
    if len(source) > SOURCE_MAX:
        raise InvalidInput(
            f"{where}: a template is at most {SOURCE_MAX} characters", code="e.noti.listener.badtemplate"
        )
    text = "{{ (" + source + ") }}" if as_expression else source
    try:
        tree = ENV.parse(text)
    except TemplateError as exc:
        raise InvalidInput(f"{where}: {_describe(exc)}", code="e.noti.listener.badtemplate") from None
    problem = _static_problems(tree)
    if problem:
        raise InvalidInput(f"{where}: {problem}", code="e.noti.listener.unsafe")
    try:
        variables = meta.find_undeclared_variables(tree)  # compiles it: finds unknown filters
    except TemplateError as exc:
        raise InvalidInput(f"{where}: {_describe(exc)}", code="e.noti.listener.badtemplate") from None
    return tree, frozenset(variables)


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


#: A piece of a substitution-only template: its text, or the path of a variable to print.
Piece = str | tuple[str, ...]
#: The largest integer the fast path prints itself (longer ones: Jinja's way, with its checks).
_FAST_INT_MAX = 10**15


def _variable_path(node: nodes.Node) -> tuple[str, ...] | None:
    """``a``, ``a.b``, ``a['b']`` … as the names to look up, or None for anything else."""
    keys: list[str] = []
    while isinstance(node, (nodes.Getattr, nodes.Getitem)):
        if isinstance(node, nodes.Getattr):
            keys.append(node.attr)
        elif isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str):
            keys.append(node.arg.value)
        else:
            return None
        node = node.node
    if not isinstance(node, nodes.Name) or node.ctx != "load":
        return None
    keys.append(node.name)
    return tuple(reversed(keys))


def _substitution_pieces(tree: nodes.Template) -> tuple[Piece, ...] | None:
    """The pieces of a template that is only text and printed variables (``Order {{ id }}
    for {{ customer.name }}``: most notification templates), or None when it has anything
    else (a filter, a test, an expression, a tag)."""
    pieces: list[Piece] = []
    for node in tree.body:
        if not isinstance(node, nodes.Output):
            return None
        for child in node.nodes:
            if isinstance(child, nodes.TemplateData):
                pieces.append(child.data)
                continue
            path = _variable_path(child)
            if path is None:
                return None
            pieces.append(path)
    return tuple(pieces)


class _Slow(Exception):
    """The fast path met something only Jinja's own rendering may answer."""


def _looked_up(values: Mapping[str, Any], path: tuple[str, ...]) -> str:
    """The text of one printed variable, as the sandbox would print it, for plain values only:
    a dict key that is no ``dict`` attribute (Jinja would look the attribute up first), a
    string within the output limit, a bool, None, a float, a small int. Anything else (a
    missing name: Jinja's error; a list; an object) raises :class:`_Slow`."""
    value: Any = values
    for key in path:
        if type(value) is not dict or hasattr(dict, key):
            raise _Slow
        try:
            value = value[key]
        except KeyError:
            raise _Slow from None
    kind = type(value)
    if kind is str:
        if len(value) > OUTPUT_MAX:
            raise _Slow
        return value  # type: ignore[no-any-return]
    if (
        value is None
        or kind is bool
        or kind is float
        or (kind is int and -_FAST_INT_MAX < value < _FAST_INT_MAX)
    ):
        return str(value)
    raise _Slow


@dataclass(frozen=True, slots=True)
class CompiledTemplate:
    """A checked template and the top-level variables it uses."""

    source: str
    where: str
    template: Template
    variables: frozenset[str]
    #: The pieces of a substitution-only template (:func:`_substitution_pieces`), rendered
    #: without Jinja when every variable is a plain value; None: always Jinja's way. Measured
    #: reason (bench scenario 19, ``notify(recipient=…, template=…)``): Jinja's sandboxed
    #: rendering of a one-line template was the largest Python cost of a notice.
    pieces: tuple[Piece, ...] | None = None

    def render(self, values: Mapping[str, Any], *, prefix: str = RUNTIME_PREFIX) -> str:
        """The text for ``values`` (see :func:`context`).

        Raises:
            InvalidInput: ``<prefix>.undefined`` (a variable the payload lacks), ``.unsafe``
            (the sandbox refused), ``.error`` (anything else going wrong in the template, or
            more than :data:`~noti.events.limits.OUTPUT_MAX` characters).
        """
        if self.pieces is not None and type(values) is dict:
            try:
                text = "".join([p if type(p) is str else _looked_up(values, p) for p in self.pieces])  # type: ignore[arg-type]
            except _Slow:
                pass
            else:
                if len(text) <= OUTPUT_MAX:
                    return text
        parts: list[str] = []
        size = 0
        token = STEPS.set(Steps())
        try:
            with closing(cast(Generator[str, None, None], self.template.generate(values))) as chunks:
                for chunk in chunks:
                    size += len(chunk)
                    if size > OUTPUT_MAX:
                        raise InvalidInput(
                            f"{self.where}: the template produced more than {OUTPUT_MAX} characters",
                            code=f"{prefix}.error",
                        )
                    parts.append(chunk)
        except InvalidInput:
            raise
        except Exception as exc:  # noqa: BLE001 - any template failure is reported the same way
            raise _render_error(exc, self.where, prefix) from None
        finally:
            STEPS.reset(token)
        return "".join(parts)


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
        token = STEPS.set(Steps())
        try:
            return bool(self.expression(**values))
        except Exception as exc:  # noqa: BLE001
            raise _render_error(exc, "filter", prefix) from None
        finally:
            STEPS.reset(token)


def compile_template(source: object, where: str) -> CompiledTemplate:
    """Check and compile one template; ``where`` names it in error messages (``field 'text'``).

    Raises:
        InvalidInput: ``e.noti.listener.badtemplate`` (not a string, too long, a syntax
        error, an unknown filter), ``e.noti.listener.unsafe`` (see the module doc).
    """
    if not isinstance(source, str):
        raise InvalidInput(
            f"{where}: a template is a string, got {type(source).__name__}",
            code="e.noti.listener.badtemplate",
        )
    with _nesting(where, "e.noti.listener.badtemplate"):
        tree, variables = _parse(source, where, as_expression=False)
        try:
            code = ENV.compile(_budget_loops(tree))
        except TemplateError as exc:
            raise InvalidInput(f"{where}: {_describe(exc)}", code="e.noti.listener.badtemplate") from None
        template = ENV.template_class.from_code(ENV, code, ENV.make_globals(None), None)
        return CompiledTemplate(source, where, template, variables, _substitution_pieces(tree))


@contextmanager
def _nesting(where: str, code: str) -> Iterator[None]:
    """Refuse a template nested deeper than Jinja's parser or Python's compiler can take
    (~100 nested blocks, or a few hundred nested parentheses: Python's recursion limit, its
    100 levels of indentation) as bad input, not as a crash."""
    try:
        yield
    except (RecursionError, SyntaxError):
        raise InvalidInput(
            f"{where}: nested too deeply (blocks, parentheses or brackets inside each other)", code=code
        ) from None


def compile_filter(source: object) -> CompiledFilter:
    """Check and compile a filter expression (``total > 100 and customer.vip``).

    Raises:
        InvalidInput: ``e.noti.listener.badfilter`` (syntax), ``e.noti.listener.unsafe``.
    """
    if not isinstance(source, str) or not source.strip():
        raise InvalidInput("a filter is a non-empty Jinja expression", code="e.noti.listener.badfilter")
    with _nesting("filter", "e.noti.listener.badfilter"):
        try:
            expression = ENV.compile_expression(source, undefined_to_none=False)
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
