"""What a listener template may build and do, measured before it is built: the limits
(:data:`OUTPUT_MAX`, :data:`STEPS_MAX`, …), the size of a value as text, the checks that
refuse a width, a result or a ``%`` format past them, and the step budget of one rendering.

The sandbox (:mod:`noti.events.sandbox`) calls these checks from its operators, methods and
filters; a rendering (:mod:`noti.events.templates`) opens the step budget.
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from jinja2.exceptions import SecurityError
from jinja2.utils import Namespace

__all__ = [
    "INT_BITS_MAX",
    "OUTPUT_MAX",
    "POWER_MAX",
    "RANGE_MAX",
    "STEPS",
    "STEPS_MAX",
    "Steps",
    "check_join",
    "check_printf",
    "check_replace",
    "check_result",
    "check_text",
    "check_width",
    "counted",
    "indent_size",
    "refuse",
    "text_size",
    "tick",
]

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


# --- sizes and the per-rendering step budget --------------------------------------------------


def text_size(value: Any, limit: int = OUTPUT_MAX) -> int:
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


def indent_size(value: Any, indent: int, limit: int = OUTPUT_MAX) -> int:
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


def refuse(message: str) -> SecurityError:
    return SecurityError(message)


def check_text(value: Any, what: str) -> None:
    """Refuse to turn a large non-string value (a list that repeats a long string) into text."""
    if not isinstance(value, str) and text_size(value) > OUTPUT_MAX:
        raise refuse(f"{what} would make more than {OUTPUT_MAX} characters of text")


def check_width(value: Any, what: str) -> None:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > OUTPUT_MAX:
        raise refuse(f"{what}: {value} is above the limit of {OUTPUT_MAX}")


def check_result(size: int, what: str) -> None:
    if size > OUTPUT_MAX:
        raise refuse(f"{what} would make {size} characters or more, more than {OUTPUT_MAX}")


class Steps:
    """What is left of one rendering's :data:`STEPS_MAX`."""

    __slots__ = ("left",)

    def __init__(self) -> None:
        self.left = STEPS_MAX


#: The budget of the rendering under way (None: outside one, nothing is counted).
STEPS: contextvars.ContextVar[Steps | None] = contextvars.ContextVar("noti_template_steps", default=None)


def tick() -> None:
    steps = STEPS.get()
    if steps is not None:
        steps.left -= 1
        if steps.left < 0:
            raise refuse(f"the template took more than {STEPS_MAX} steps (loop iterations and calls)")


def counted(iterable: Iterable[Any]) -> Iterator[Any]:
    """Every ``{% for %}`` loop iterates through this (the sandbox's ``LOOP_FILTER``, which
    :mod:`noti.events.templates` puts on every loop when it compiles a template)."""
    for item in iterable:
        tick()
        yield item


# --- printf, replace and join ------------------------------------------------------------------

_PRINTF = re.compile(
    r"%(?:\((?P<key>[^)]*)\))?[-#0 +]*(?P<width>\*|\d+)?(?:\.(?P<prec>\*|\d+))?[hlL]?(?P<conv>.)", re.S
)


def check_printf(fmt: str, values: Any) -> None:
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
        total += max([text_size(value), *widths])
        check_result(total, "this format")


def check_replace(s: Any, old: Any, new: Any, count: Any) -> None:
    if not (isinstance(s, str) and isinstance(old, str) and isinstance(new, str)):
        return
    found = s.count(old) if old else len(s) + 1
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    check_result(len(s) + found * (len(new) - len(old)), "replace")


def check_join(items: list[Any], separator: str) -> None:
    total = max(len(items) - 1, 0) * len(separator)
    check_result(total, "join")
    for item in items:
        total += text_size(item)
        check_result(total, "join")
