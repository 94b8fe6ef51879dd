"""Placement-log parsing for every TensorFlow version; never imports tensorflow."""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import BinaryIO

from placement_cli.exceptions import InputError
from placement_cli.i18n import _
from placement_cli.logparse import parallel
from placement_cli.logparse.engine import parse_streams
from placement_cli.logparse.reader import stdin_stream
from placement_cli.model import Report

__all__ = ["InputError", "parse_paths", "parse_text"]


def parse_text(text: str) -> Report:
    """Parse a captured log held in memory (whatever a script printed into it: it is
    never refused as binary)."""
    if not text:
        return Report()
    return parse_streams([("<text>", io.BytesIO(text.encode("utf-8", "replace")))], known_text=True)


def _open(path: str, stack: ExitStack, stdin: BinaryIO | None = None) -> tuple[str, BinaryIO]:
    if path == "-":
        return "<stdin>", stdin or stdin_stream()
    if os.path.isdir(path):
        raise InputError(_("{path}: is a directory, not a log file").format(path=path))
    try:
        return path, stack.enter_context(open(path, "rb"))
    except FileNotFoundError:
        raise InputError(_("{path}: no such file").format(path=path)) from None
    except OSError as exc:
        raise InputError(_("{path}: cannot read ({why})").format(path=path, why=exc.strerror or exc)) from None


def parse_paths(paths: list[str], *, keep: bool = True, note: Callable[[str], None] | None = None,
                stdin: BinaryIO | None = None) -> Report:
    """Parse files (``-`` is standard input) as one stream; InputError if unreadable.

    Compressed files (gzip, bzip2, xz) are read decompressed, and ``note`` is told so.
    A second ``-`` reads what is left of standard input: nothing, as ``cat - -`` does. ``stdin``: standard
    input's bytes, where some were read already to tell what it is."""
    if not keep and len(paths) == 1 and paths[0] != "-":
        report = parallel.count_split(paths[0])
        if report is not None:
            return report
    with ExitStack() as stack:
        def sources() -> Iterator[tuple[str, BinaryIO]]:
            for path in paths:
                yield _open(path, stack, stdin)

        return parse_streams(sources(), keep=keep, note=note)
