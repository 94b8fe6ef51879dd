"""Imported by site as python starts `placement trace`'s child (this folder is on the child's
PYTHONPATH for that alone): placement_cli.runtime.trace.child sets up before the script's first line,
then takes this folder off sys.path and imports the user's own sitecustomize, if any."""

import os
import sys


def _boot() -> None:
    root = os.path.abspath(__file__)
    for _ in range(5):  # placement_cli/runtime/trace/boot/sitecustomize.py: the folder placement_cli is in
        root = os.path.dirname(root)
    sys.path.insert(0, root)
    try:
        from placement_cli.runtime.trace import child  # noqa: PLC0415 - importable only once the root is on sys.path
    finally:
        sys.path.remove(root)
    child.start(sys.modules[__name__])


_boot()
del _boot
