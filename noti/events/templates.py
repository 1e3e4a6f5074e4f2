"""Listener templates: Jinja2 in an immutable sandbox, compiled and checked when a listener
is added, rendered against each event's payload by the processor.

A template sees the payload's top-level keys as variables (``{{ customer.phone }}``,
``Order {{ id }} paid``) and ``_event`` (``id``, ``name``, ``user``, ``created_ms``).
Undefined variables are errors, never empty strings (``StrictUndefined``): use
``{{ x | default('') }}`` or ``{% if x is defined %}`` for optional values.

What the sandbox refuses, at ``add_listener`` when it is written in the template, else when
it would happen (recorded on the event as ``e.noti.event.template.unsafe``):

* any attribute or item whose name starts with ``_``, and methods that change a value
  (``dict.update``, ``list.append``);
* ``include`` / ``import`` / ``extends``, and the blocks that buffer text out of sight of
  the output limit: ``macro``, ``call``, ``filter`` blocks, ``set`` blocks, ``block``;
* ``lipsum``, ``cycler``, ``joiner`` and the ``pprint`` filter (not available);
* anything that would build a value longer than :data:`OUTPUT_MAX` characters, refused
  *before* it is built: widths, counts and padding above it (``center``, ``indent``,
  ``wordwrap``, ``truncate``, ``batch``, ``slice``, ``str.ljust``/``rjust``/``zfill``,
  format widths and precisions in ``format``, ``%`` and ``str.format``), and results above
  it (repetition ``*``, concatenation ``+`` and ``~``, ``replace``, ``join``, ``indent``,
  ``wordwrap``, ``format``, ``tojson``, printing or stringifying a large list);
  ``str.translate`` and ``str.encode``;
* ``range`` over more than :data:`RANGE_MAX` items, integers above :data:`INT_BITS_MAX`
  bits (``*``, ``**``) and exponents above :data:`POWER_MAX`;
* more than :data:`STEPS_MAX` loop iterations and calls in one rendering;
* output over :data:`OUTPUT_MAX` characters (counted as it is produced).
"""

from __future__ import annotations

import contextvars
import functools
import re
import textwrap
import types
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from contextlib import closing
from dataclasses import dataclass
from typing import Any, cast

from jinja2 import (
    Environment,
    StrictUndefined,
    Template,
    TemplateError,
    UndefinedError,
    meta,
    nodes,
    pass_environment,
    pass_eval_context,
)
from jinja2.compiler import CodeGenerator, Frame, optimizeconst
from jinja2.exceptions import SecurityError
from jinja2.filters import make_attrgetter
from jinja2.nodes import EvalContext
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedFormatter
from jinja2.utils import Namespace
from markupsafe import EscapeFormatter, Markup

from noti.errors import InvalidInput

__all__ = ["EVENT_VAR", "CompiledFilter", "CompiledTemplate", "compile_filter", "compile_template", "context"]

#: The variable holding the event's own fields (id, name, user, created_ms).
EVENT_VAR = "_event"
#: Longest text one template may produce, and longest value it may build.
OUTPUT_MAX = 64 * 1024
#: Longest ``range()`` a template may loop over.
RANGE_MAX = 1000
#: Largest exponent ``**`` accepts.
POWER_MAX = 100
#: Largest integer (in bits) ``*`` and ``**`` may build.
INT_BITS_MAX = 8192
#: Most loop iterations plus calls one rendering may take.
STEPS_MAX = 100_000
SOURCE_MAX = 16 * 1024

#: The codes of render failures; at add time (with an example payload) the prefix is
#: ``e.noti.listener`` instead of ``e.noti.event.template``.
RUNTIME_PREFIX = "e.noti.event.template"
ADD_PREFIX = "e.noti.listener"

_REMOVED_GLOBALS = ("lipsum", "cycler", "joiner")
_REMOVED_FILTERS = ("pprint",)
#: Filters and ``str`` methods whose numeric arguments are widths or counts.
_WIDTH_FILTERS = frozenset({"center", "indent", "wordwrap", "truncate", "batch", "slice", "tojson"})
_WIDTH_METHODS = frozenset({"center", "ljust", "rjust", "zfill", "expandtabs"})
_REFUSED_METHODS = frozenset({"translate", "maketrans", "encode"})
_BUFFERING = {
    nodes.Macro: "{% macro %}",
    nodes.CallBlock: "{% call %}",
    nodes.FilterBlock: "{% filter %}",
    nodes.AssignBlock: "{% set %}…{% endset %}",
    nodes.Block: "{% block %}",
}
_LOOP_FILTER = "_noti_steps"
#: Keyword arguments Jinja's compiled code passes to every call, for its own use.
_CONTEXT_KWARGS = frozenset({"_loop_vars", "_block_vars"})


# --- sizes and the per-rendering step budget --------------------------------------------------


def _text_size(value: Any, limit: int = OUTPUT_MAX) -> int:
    """A lower bound of ``len(str(value))`` (exact for a string); stops counting past ``limit``.

    Containers count their items each time they are referenced, as ``str()`` would print them.
    """
    if isinstance(value, str):
        return len(value)
    total = 0
    stack: list[Any] = [value]
    while stack and total <= limit:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item) + 2
        elif isinstance(item, Mapping):
            total += 2 + 4 * len(item)
            for key, val in item.items():
                stack.append(key)
                stack.append(val)
        elif isinstance(item, list | tuple | set | frozenset):
            total += 2 + 2 * len(item)
            stack.extend(item)
        elif isinstance(item, Namespace):
            total += 12
            stack.append(item._Namespace__attrs)
        elif isinstance(item, bool) or item is None:
            total += 4
        elif isinstance(item, int):
            total += max(1, item.bit_length() * 3 // 10)
        else:
            total += 1
    return total


def _indent_size(value: Any, indent: int, limit: int = OUTPUT_MAX) -> int:
    """About how many characters of indentation ``json.dumps(value, indent=indent)`` adds."""
    total = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack and total <= limit:
        item, depth = stack.pop()
        total += depth * max(indent, 0) + 1
        if isinstance(item, Mapping):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list | tuple):
            stack.extend((v, depth + 1) for v in item)
    return total


def _refuse(message: str) -> SecurityError:
    return SecurityError(message)


def _check_text(value: Any, what: str) -> None:
    """Refuse to turn a large non-string value (a list that repeats a long string) into text."""
    if not isinstance(value, str) and _text_size(value) > OUTPUT_MAX:
        raise _refuse(f"{what} would make more than {OUTPUT_MAX} characters of text")


def _check_width(value: Any, what: str) -> None:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > OUTPUT_MAX:
        raise _refuse(f"{what}: {value} is above the limit of {OUTPUT_MAX}")


def _check_result(size: int, what: str) -> None:
    if size > OUTPUT_MAX:
        raise _refuse(f"{what} would make {size} characters or more, more than {OUTPUT_MAX}")


class _Steps:
    __slots__ = ("left",)

    def __init__(self) -> None:
        self.left = STEPS_MAX


_STEPS: contextvars.ContextVar[_Steps | None] = contextvars.ContextVar("noti_template_steps", default=None)


def _tick() -> None:
    steps = _STEPS.get()
    if steps is not None:
        steps.left -= 1
        if steps.left < 0:
            raise _refuse(f"the template took more than {STEPS_MAX} steps (loop iterations and calls)")


def _counted(iterable: Iterable[Any]) -> Iterator[Any]:
    """Every ``{% for %}`` loop iterates through this (see :func:`_budget_loops`)."""
    for item in iterable:
        _tick()
        yield item


# --- printf and str.format ----------------------------------------------------------------------

_PRINTF = re.compile(
    r"%(?:\((?P<key>[^)]*)\))?[-#0 +]*(?P<width>\*|\d+)?(?:\.(?P<prec>\*|\d+))?[hlL]?(?P<conv>.)", re.S
)
_SPEC_NUMBER = re.compile(r"\d+")


def _check_printf(fmt: str, values: Any) -> None:
    """Refuse ``fmt % values`` when its widths, precisions and values add up past the limit."""
    args = values if isinstance(values, tuple) else (values,)
    mapping = values if isinstance(values, Mapping) else None
    index = 0
    total = len(fmt)
    for match in _PRINTF.finditer(fmt):
        if match["conv"] == "%":
            continue
        widths = []
        for part in (match["width"], match["prec"]):
            if part == "*":
                star = args[index] if index < len(args) else 0
                index += 1
                widths.append(abs(star) if isinstance(star, int) else 0)
            elif part:
                widths.append(int(part) if len(part) <= 7 else OUTPUT_MAX + 1)
        if match["key"] is not None and mapping is not None:
            value = mapping.get(match["key"])
        else:
            value = args[index] if index < len(args) else None
            index += 1
        total += max([_text_size(value), *widths])
        _check_result(total, "this format")


class _FormatterMixin:
    """Counts what ``str.format`` builds, and refuses large widths before formatting a field."""

    _size = 0

    def format_field(self, value: Any, format_spec: str) -> Any:
        for number in _SPEC_NUMBER.findall(format_spec):
            if len(number) > 7 or int(number) > OUTPUT_MAX:
                raise _refuse(f"format: width or precision {number} is above the limit of {OUTPUT_MAX}")
        _check_text(value, "format")
        text = super().format_field(value, format_spec)  # type: ignore[misc]
        self._size += len(text)
        _check_result(self._size, "format")
        return text


class _Formatter(_FormatterMixin, SandboxedFormatter):
    pass


class _EscapeFormatter(_FormatterMixin, SandboxedFormatter, EscapeFormatter):
    pass


# --- the sandbox --------------------------------------------------------------------------------


class _CodeGenerator(CodeGenerator):
    @optimizeconst
    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        # ``a ~ b`` goes through the environment, which checks the size first.
        if frame.eval_ctx.volatile:
            func_name = "(markup_join if context.eval_ctx.volatile else str_join)"
        elif frame.eval_ctx.autoescape:
            func_name = "markup_join"
        else:
            func_name = "str_join"
        self.write(f"environment.checked_concat({func_name}, (")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class _Sandbox(ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset({"*", "**", "+", "%"})
    code_generator_class = _CodeGenerator

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        if operator == "**":
            if isinstance(right, int | float) and abs(right) > POWER_MAX:
                raise _refuse(f"exponents above {POWER_MAX} are not allowed in templates")
            if isinstance(left, int) and isinstance(right, int) and left.bit_length() * right > INT_BITS_MAX:
                raise _refuse(f"numbers above {INT_BITS_MAX} bits are not allowed in templates")
        elif operator == "*":
            if isinstance(left, int) and isinstance(right, int):
                if left.bit_length() + right.bit_length() > INT_BITS_MAX:
                    raise _refuse(f"numbers above {INT_BITS_MAX} bits are not allowed in templates")
            for seq, times in ((left, right), (right, left)):
                if isinstance(seq, str | list | tuple) and isinstance(times, int) and times > 0:
                    if len(seq) * times > OUTPUT_MAX or _text_size(seq) * times > OUTPUT_MAX:
                        raise _refuse(f"repetition beyond {OUTPUT_MAX} characters or items is not allowed")
        elif operator == "+":
            if isinstance(left, str | list | tuple) and isinstance(right, str | list | tuple):
                _check_result(_text_size(left) + _text_size(right), "this concatenation")
        elif operator == "%" and isinstance(left, str):
            _check_printf(left, right)
        return super().call_binop(context, operator, left, right)

    def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
        # Refuse at the point of access; the default returns an undefined value whose later
        # use reports a confusing "no attribute" error instead.
        raise _refuse(f"access to attribute {attribute!r} of a {type(obj).__name__!r} value is unsafe")

    def checked_concat(self, join: Callable[[Iterable[Any]], str], parts: tuple[Any, ...]) -> str:
        """``a ~ b ~ …`` (see :class:`_CodeGenerator`)."""
        total = 0
        for part in parts:
            total += _text_size(part)
            _check_result(total, "this concatenation (~)")
        return join(parts)

    def call(self, context: Context, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        _tick()
        owner = getattr(obj, "__self__", None)
        if isinstance(obj, types.BuiltinMethodType | types.MethodType) and isinstance(owner, str):
            name = obj.__name__
            given = {k: v for k, v in kwargs.items() if k not in _CONTEXT_KWARGS}
            if name in _REFUSED_METHODS:
                raise _refuse(f"str.{name}() is not allowed in templates")
            if name in _WIDTH_METHODS:
                for arg in (*args, *given.values()):
                    _check_width(arg, f"str.{name}()")
                tabsize = args[0] if args else given.get("tabsize", 8)
                if name == "expandtabs" and isinstance(tabsize, int):
                    _check_result(len(owner) + owner.count("\t") * tabsize, "str.expandtabs()")
            elif name == "replace" and len(args) >= 2:
                _check_replace(owner, args[0], args[1], args[2] if len(args) > 2 else given.get("count", -1))
            elif name == "join" and len(args) == 1 and not given:
                items = list(_counted(args[0]))
                _check_join(items, owner)
                return owner.join(items)
        return super().call(context, obj, *args, **kwargs)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        # As Jinja's, with a formatter that counts what it builds.
        if not isinstance(value, types.MethodType | types.BuiltinMethodType) or value.__name__ not in (
            "format",
            "format_map",
        ):
            return None
        f_self = value.__self__
        if not isinstance(f_self, str):
            return None
        str_type = type(f_self)
        is_format_map = value.__name__ == "format_map"

        def wrapper(*args: Any, **kwargs: Any) -> str:
            if is_format_map:
                if kwargs:
                    raise TypeError("format_map() takes no keyword arguments")
                if len(args) != 1:
                    raise TypeError(f"format_map() takes exactly one argument ({len(args)} given)")
                kwargs, args = args[0], ()
            formatter: SandboxedFormatter = (
                _EscapeFormatter(self, escape=f_self.escape)
                if isinstance(f_self, Markup)
                else _Formatter(self)
            )
            return str_type(formatter.vformat(f_self, args, kwargs))

        return functools.update_wrapper(wrapper, value)


def _check_replace(s: Any, old: Any, new: Any, count: Any) -> None:
    if not (isinstance(s, str) and isinstance(old, str) and isinstance(new, str)):
        return
    found = s.count(old) if old else len(s) + 1
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    _check_result(len(s) + found * (len(new) - len(old)), "replace")


def _check_join(items: list[Any], separator: str) -> None:
    total = max(len(items) - 1, 0) * len(separator)
    _check_result(total, "join")
    for item in items:
        total += _text_size(item)
        _check_result(total, "join")


def _small_range(*args: int) -> range:
    values = range(*args)
    if len(values) > RANGE_MAX:
        raise _refuse(f"range() of more than {RANGE_MAX} items is not allowed in templates")
    return values


def _finalize(value: Any) -> Any:
    _check_text(value, "printing this value")
    return value


# --- filters: the stock ones, checked first ----------------------------------------------------


def _text_input(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """``original`` (a filter that turns its value into text), refusing a large non-string value."""
    value_at = 1 if hasattr(original, "jinja_pass_arg") else 0

    @functools.wraps(original)
    def checked(*args: Any, **kwargs: Any) -> Any:
        if len(args) > value_at:
            _check_text(args[value_at], f"the filter {name}")
        return original(*args, **kwargs)

    return checked


def _filters(stock: Mapping[str, Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
    center, indent, truncate, fmt = stock["center"], stock["indent"], stock["truncate"], stock["format"]
    replace, join, tojson, urlize = stock["replace"], stock["join"], stock["tojson"], stock["urlize"]
    batch, slice_ = stock["batch"], stock["slice"]

    def do_center(value: Any, width: int = 80) -> str:
        _check_width(width, "center")
        return str(center(value, width))

    def do_indent(s: Any, width: int | str = 4, first: bool = False, blank: bool = False) -> str:
        _check_width(width, "indent")
        text = str(s)
        step = width if isinstance(width, int) else len(str(width))
        _check_result(len(text) + (text.count("\n") + 1) * max(step, 0), "indent")
        return str(indent(text, width, first, blank))

    @pass_environment
    def do_truncate(
        env: Environment,
        s: Any,
        length: int = 255,
        killwords: bool = False,
        end: str = "...",
        leeway: int | None = None,
    ) -> str:
        _check_width(length, "truncate")
        _check_width(leeway, "truncate")
        return str(truncate(env, s, length, killwords, end, leeway))

    @pass_environment
    def do_wordwrap(
        env: Environment,
        s: Any,
        width: int = 79,
        break_long_words: bool = True,
        wrapstring: str | None = None,
        break_on_hyphens: bool = True,
    ) -> str:
        # Jinja's wordwrap, measured before it is joined.
        _check_width(width, "wordwrap")
        separator = env.newline_sequence if wrapstring is None else str(wrapstring)
        paragraphs = [
            textwrap.wrap(
                line,
                width=width,
                expand_tabs=False,
                replace_whitespace=False,
                break_long_words=break_long_words,
                break_on_hyphens=break_on_hyphens,
            )
            for line in str(s).splitlines()
        ]
        separators = sum(max(len(lines) - 1, 0) for lines in paragraphs) + max(len(paragraphs) - 1, 0)
        size = sum(len(line) for lines in paragraphs for line in lines) + separators * len(separator)
        _check_result(size, "wordwrap")
        return separator.join([separator.join(lines) for lines in paragraphs])

    def do_format(value: Any, *args: Any, **kwargs: Any) -> str:
        text = str(value)
        if not (args and kwargs):
            _check_printf(text, kwargs or args)
        return str(fmt(text, *args, **kwargs))

    @pass_eval_context
    def do_replace(eval_ctx: EvalContext, s: Any, old: Any, new: Any, count: int | None = None) -> str:
        _check_replace(str(s), str(old), str(new), count)
        return str(replace(eval_ctx, s, old, new, count))

    @pass_eval_context
    def do_join(eval_ctx: EvalContext, value: Any, d: str = "", attribute: str | int | None = None) -> str:
        items = list(_counted(value))
        if attribute is not None:
            items = list(map(make_attrgetter(eval_ctx.environment, attribute), items))
        _check_join(items, str(d))
        return str(join(eval_ctx, items, d))

    @pass_eval_context
    def do_tojson(eval_ctx: EvalContext, value: Any, indent: int | None = None) -> Any:
        _check_text(value, "tojson")
        if isinstance(indent, int):
            _check_width(indent, "tojson")
            _check_result(_text_size(value) + _indent_size(value, indent), "tojson with indent")
        return tojson(eval_ctx, value, indent)

    @pass_eval_context
    def do_urlize(
        eval_ctx: EvalContext,
        value: Any,
        trim_url_limit: int | None = None,
        nofollow: bool = False,
        target: str | None = None,
        rel: str | None = None,
        extra_schemes: Any = None,
    ) -> str:
        # Each link adds its address again, the attributes and some markup; only words with
        # one of . @ : can become links.
        text = str(value)
        extra = len(str(target or "")) + len(str(rel or "")) + 64
        links = [word for word in text.split() if any(c in word for c in ".@:")]
        _check_result(len(text) + sum(len(word) + extra for word in links), "urlize")
        return str(urlize(eval_ctx, text, trim_url_limit, nofollow, target, rel, extra_schemes))

    def do_batch(value: Any, linecount: int, fill_with: Any = None) -> Any:
        _check_width(linecount, "batch")
        return batch(value, linecount, fill_with)

    @pass_eval_context
    def do_slice(eval_ctx: EvalContext, value: Any, slices: int, fill_with: Any = None) -> Any:
        _check_width(slices, "slice")
        return slice_(eval_ctx, value, slices, fill_with)

    filters = {name: f for name, f in stock.items() if name not in _REMOVED_FILTERS}
    for name in ("string", "e", "escape", "forceescape", "safe", "trim", "upper", "lower", "title",
                 "capitalize", "striptags", "urlencode", "wordcount", "xmlattr"):  # fmt: skip
        filters[name] = _text_input(name, stock[name])
    checked: dict[str, Callable[..., Any]] = {
        "center": do_center,
        "indent": do_indent,
        "truncate": do_truncate,
        "wordwrap": do_wordwrap,
        "format": do_format,
        "replace": do_replace,
        "join": do_join,
        "tojson": do_tojson,
        "urlize": do_urlize,
        "batch": do_batch,
        "slice": do_slice,
    }
    for name, f in checked.items():
        filters[name] = _text_input(name, f) if name in ("center", "indent", "truncate", "wordwrap") else f
    filters[_LOOP_FILTER] = _counted
    return filters


def _environment() -> _Sandbox:
    env = _Sandbox(
        undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True, finalize=_finalize
    )
    for name in _REMOVED_GLOBALS:
        env.globals.pop(name, None)
    env.globals["range"] = _small_range
    env.filters = _filters(env.filters)
    return env


_ENV = _environment()


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
        if getattr_node.attr in _REFUSED_METHODS:
            return f"the method {getattr_node.attr!r} is not allowed in listener templates"
    for getitem in tree.find_all(nodes.Getitem):
        arg = getitem.arg
        if isinstance(arg, nodes.Const) and isinstance(arg.value, str) and arg.value.startswith("_"):
            return f"item {arg.value!r} is not allowed (names starting with _ are private)"
    for call in tree.find_all(nodes.Call):
        if isinstance(call.node, nodes.Name) and call.node.name in _REMOVED_GLOBALS:
            return f"{call.node.name}() is not available in listener templates"
        if isinstance(call.node, nodes.Getattr) and call.node.attr in _WIDTH_METHODS:
            big = _big_constant([*call.args, *call.kwargs])
            if big is not None:
                return f"{call.node.attr}(): {big} is above the limit of {OUTPUT_MAX}"
    for flt in tree.find_all(nodes.Filter):
        if flt.name in _REMOVED_FILTERS:
            return f"the filter {flt.name!r} is not available in listener templates"
        if flt.name in _WIDTH_FILTERS:
            big = _big_constant([*flt.args, *flt.kwargs])
            if big is not None:
                return f"{flt.name}: {big} is above the limit of {OUTPUT_MAX}"
    return None


def _budget_loops(tree: nodes.Template) -> nodes.Template:
    """Make every ``{% for %}`` loop count its iterations against :data:`STEPS_MAX`."""
    for loop in tree.find_all(nodes.For):
        counted = nodes.Filter(loop.iter, _LOOP_FILTER, [], [], None, None, lineno=loop.iter.lineno)
        loop.iter = counted.set_environment(_ENV)
    return tree


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
            (the sandbox refused), ``.error`` (anything else going wrong in the template, or
            more than :data:`OUTPUT_MAX` characters).
        """
        parts: list[str] = []
        size = 0
        token = _STEPS.set(_Steps())
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
            _STEPS.reset(token)
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
        token = _STEPS.set(_Steps())
        try:
            return bool(self.expression(**values))
        except Exception as exc:  # noqa: BLE001
            raise _render_error(exc, "filter", prefix) from None
        finally:
            _STEPS.reset(token)


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
    tree, variables = _parse(source, where, as_expression=False)
    try:
        code = _ENV.compile(_budget_loops(tree))
    except TemplateError as exc:
        raise InvalidInput(f"{where}: {_describe(exc)}", code="e.noti.listener.badtemplate") from None
    template = _ENV.template_class.from_code(_ENV, code, _ENV.make_globals(None), None)
    return CompiledTemplate(source, where, template, variables)


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
