"""The table of metric names, generated from :data:`noti.observe.prometheus.METRICS`.

    python -m noti.observe.docs           # print the table

The documentation's metrics page (``docs/howto/metrics.md``) is built with this table
(``docsgen``), so it always lists what the collector serves.
"""

from __future__ import annotations

from noti.observe.prometheus import METRICS

__all__ = ["table"]


def table() -> str:
    """The Markdown table of every metric served, in the order served."""
    lines = ["| metric | type | labels | meaning |", "| --- | --- | --- | --- |"]
    for m in METRICS:
        labels = ", ".join(f"`{label}`" for label in m.labels) or "–"
        lines.append(f"| `{m.name}` | {m.type} | {labels} | {m.help} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
