"""Run one ``noti`` command in this fresh process, then write what it imported.

``python -m tests.cli_modules OUT ARGS...`` runs ``noti ARGS...`` as the ``noti`` script
does (:func:`noti.cli.console_main`; stdout and stderr as the command prints them) and
writes to the file OUT, as JSON, the exit code, this process's id,
``sorted(sys.modules)`` and the cycle collector's state (enabled, objects frozen) after the
command ran (tests/test_fast_cli.py).
"""

from __future__ import annotations

import gc
import json
import os
import sys


def _run(argv: list[str]) -> int:
    from noti.cli import console_main

    try:
        console_main(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    return 0


if __name__ == "__main__":
    out, *args = sys.argv[1:]
    code = _run(args)
    sys.stdout.flush()
    with open(out, "w", encoding="utf-8") as f:
        json.dump(
            {
                "exit": code,
                "pid": os.getpid(),
                "modules": sorted(sys.modules),
                "gc": {"enabled": gc.isenabled(), "frozen": gc.get_freeze_count()},
            },
            f,
        )
    sys.exit(code)
