"""The sandbox listener templates run in: Jinja2's immutable sandbox, with the operators,
``str`` methods, ``str.format``, concatenation and stock filters that could build a large
value checked first (:mod:`noti.events.limits`), and the globals and filters that could
escape the checks removed. :data:`ENV` is the one environment every template compiles in.
"""

from __future__ import annotations

import functools
import re
import textwrap
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from jinja2 import (
    Environment,
    StrictUndefined,
    nodes,
    pass_environment,
    pass_eval_context,
)
from jinja2.compiler import CodeGenerator, Frame, optimizeconst
from jinja2.filters import make_attrgetter
from jinja2.nodes import EvalContext
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedFormatter
from markupsafe import EscapeFormatter, Markup

from noti.events.limits import (
    INT_BITS_MAX,
    OUTPUT_MAX,
    POWER_MAX,
    RANGE_MAX,
    check_join,
    check_printf,
    check_replace,
    check_result,
    check_text,
    check_width,
    counted,
    indent_size,
    refuse,
    text_size,
    tick,
)

__all__ = ["ENV", "LOOP_FILTER", "REFUSED_METHODS", "REMOVED_FILTERS", "REMOVED_GLOBALS", "WIDTH_METHODS"]

#: Jinja's stock globals and filters the sandbox takes out (a template naming one is refused
#: when it is added: :mod:`noti.events.templates`).
REMOVED_GLOBALS = ("lipsum", "cycler", "joiner")
REMOVED_FILTERS = ("pprint",)
#: ``str`` methods whose numeric arguments are widths or counts.
WIDTH_METHODS = frozenset({"center", "ljust", "rjust", "zfill", "expandtabs"})
#: ``str`` methods refused outright.
REFUSED_METHODS = frozenset({"translate", "maketrans", "encode"})
#: The filter every ``{% for %}`` loop's iterable goes through, counting its steps.
LOOP_FILTER = "_noti_steps"
#: Keyword arguments Jinja's compiled code passes to every call, for its own use.
_CONTEXT_KWARGS = frozenset({"_loop_vars", "_block_vars"})


# --- str.format ---------------------------------------------------------------------------------

_SPEC_NUMBER = re.compile(r"\d+")


class _FormatterMixin:
    """Counts what ``str.format`` builds, and refuses large widths before formatting a field."""

    _size = 0

    def format_field(self, value: Any, format_spec: str) -> Any:
        for number in _SPEC_NUMBER.findall(format_spec):
            if len(number) > 7 or int(number) > OUTPUT_MAX:
                raise refuse(f"format: width or precision {number} is above the limit of {OUTPUT_MAX}")
        check_text(value, "format")
        text = super().format_field(value, format_spec)  # type: ignore[misc]
        self._size += len(text)
        check_result(self._size, "format")
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
                raise refuse(f"exponents above {POWER_MAX} are not allowed in templates")
            if isinstance(left, int) and isinstance(right, int) and left.bit_length() * right > INT_BITS_MAX:
                raise refuse(f"numbers above {INT_BITS_MAX} bits are not allowed in templates")
        elif operator == "*":
            if isinstance(left, int) and isinstance(right, int):
                if left.bit_length() + right.bit_length() > INT_BITS_MAX:
                    raise refuse(f"numbers above {INT_BITS_MAX} bits are not allowed in templates")
            for seq, times in ((left, right), (right, left)):
                if isinstance(seq, str | list | tuple) and isinstance(times, int) and times > 0:
                    if len(seq) * times > OUTPUT_MAX or text_size(seq) * times > OUTPUT_MAX:
                        raise refuse(f"repetition beyond {OUTPUT_MAX} characters or items is not allowed")
        elif operator == "+":
            if isinstance(left, str | list | tuple) and isinstance(right, str | list | tuple):
                check_result(text_size(left) + text_size(right), "this concatenation")
        elif operator == "%" and isinstance(left, str):
            check_printf(left, right)
        return super().call_binop(context, operator, left, right)

    def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
        # Refuse at the point of access; the default returns an undefined value whose later
        # use reports a confusing "no attribute" error instead.
        raise refuse(f"access to attribute {attribute!r} of a {type(obj).__name__!r} value is unsafe")

    def checked_concat(self, join: Callable[[Iterable[Any]], str], parts: tuple[Any, ...]) -> str:
        """``a ~ b ~ …`` (see :class:`_CodeGenerator`)."""
        total = 0
        for part in parts:
            total += text_size(part)
            check_result(total, "this concatenation (~)")
        return join(parts)

    def call(self, context: Context, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        tick()
        owner = getattr(obj, "__self__", None)
        if isinstance(obj, types.BuiltinMethodType | types.MethodType) and isinstance(owner, str):
            name = obj.__name__
            given = {k: v for k, v in kwargs.items() if k not in _CONTEXT_KWARGS}
            if name in REFUSED_METHODS:
                raise refuse(f"str.{name}() is not allowed in templates")
            if name in WIDTH_METHODS:
                for arg in (*args, *given.values()):
                    check_width(arg, f"str.{name}()")
                tabsize = args[0] if args else given.get("tabsize", 8)
                if name == "expandtabs" and isinstance(tabsize, int):
                    check_result(len(owner) + owner.count("\t") * tabsize, "str.expandtabs()")
            elif name == "replace" and len(args) >= 2:
                check_replace(owner, args[0], args[1], args[2] if len(args) > 2 else given.get("count", -1))
            elif name == "join" and len(args) == 1 and not given:
                items = list(counted(args[0]))
                check_join(items, owner)
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


def _small_range(*args: int) -> range:
    values = range(*args)
    if len(values) > RANGE_MAX:
        raise refuse(f"range() of more than {RANGE_MAX} items is not allowed in templates")
    return values


def _finalize(value: Any) -> Any:
    check_text(value, "printing this value")
    return value


# --- filters: the stock ones, checked first ----------------------------------------------------


def _text_input(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """``original`` (a filter that turns its value into text), refusing a large non-string value."""
    value_at = 1 if hasattr(original, "jinja_pass_arg") else 0

    @functools.wraps(original)
    def checked(*args: Any, **kwargs: Any) -> Any:
        if len(args) > value_at:
            check_text(args[value_at], f"the filter {name}")
        return original(*args, **kwargs)

    return checked


def _filters(stock: Mapping[str, Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
    center, indent, truncate, fmt = stock["center"], stock["indent"], stock["truncate"], stock["format"]
    replace, join, tojson, urlize = stock["replace"], stock["join"], stock["tojson"], stock["urlize"]
    batch, slice_ = stock["batch"], stock["slice"]

    def do_center(value: Any, width: int = 80) -> str:
        check_width(width, "center")
        return str(center(value, width))

    def do_indent(s: Any, width: int | str = 4, first: bool = False, blank: bool = False) -> str:
        check_width(width, "indent")
        text = str(s)
        step = width if isinstance(width, int) else len(str(width))
        check_result(len(text) + (text.count("\n") + 1) * max(step, 0), "indent")
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
        check_width(length, "truncate")
        check_width(leeway, "truncate")
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
        check_width(width, "wordwrap")
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
        check_result(size, "wordwrap")
        return separator.join([separator.join(lines) for lines in paragraphs])

    def do_format(value: Any, *args: Any, **kwargs: Any) -> str:
        text = str(value)
        if not (args and kwargs):
            check_printf(text, kwargs or args)
        return str(fmt(text, *args, **kwargs))

    @pass_eval_context
    def do_replace(eval_ctx: EvalContext, s: Any, old: Any, new: Any, count: int | None = None) -> str:
        check_replace(str(s), str(old), str(new), count)
        return str(replace(eval_ctx, s, old, new, count))

    @pass_eval_context
    def do_join(eval_ctx: EvalContext, value: Any, d: str = "", attribute: str | int | None = None) -> str:
        items = list(counted(value))
        if attribute is not None:
            items = list(map(make_attrgetter(eval_ctx.environment, attribute), items))
        check_join(items, str(d))
        return str(join(eval_ctx, items, d))

    @pass_eval_context
    def do_tojson(eval_ctx: EvalContext, value: Any, indent: int | None = None) -> Any:
        check_text(value, "tojson")
        if isinstance(indent, int):
            check_width(indent, "tojson")
            check_result(text_size(value) + indent_size(value, indent), "tojson with indent")
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
        check_result(len(text) + sum(len(word) + extra for word in links), "urlize")
        return str(urlize(eval_ctx, text, trim_url_limit, nofollow, target, rel, extra_schemes))

    def do_batch(value: Any, linecount: int, fill_with: Any = None) -> Any:
        check_width(linecount, "batch")
        return batch(value, linecount, fill_with)

    @pass_eval_context
    def do_slice(eval_ctx: EvalContext, value: Any, slices: int, fill_with: Any = None) -> Any:
        check_width(slices, "slice")
        return slice_(eval_ctx, value, slices, fill_with)

    filters = {name: f for name, f in stock.items() if name not in REMOVED_FILTERS}
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
    filters[LOOP_FILTER] = counted
    return filters


def _environment() -> _Sandbox:
    env = _Sandbox(
        undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True, finalize=_finalize
    )
    for name in REMOVED_GLOBALS:
        env.globals.pop(name, None)
    env.globals["range"] = _small_range
    env.filters = _filters(env.filters)
    return env


ENV = _environment()
