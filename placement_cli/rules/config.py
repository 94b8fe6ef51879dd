"""The rules of `placement check` kept in a file: ``[tool.placement.check]`` in pyproject.toml (read
with the standard library's tomllib), or a file given with --config."""

from __future__ import annotations

import codecs
import os
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from placement_cli.exceptions import RuleError
from placement_cli.i18n import N_, _, translated
from placement_cli.rules import Rules, rules_from

PYPROJECT = "pyproject.toml"
# A key of the table -> rules_from's argument (the command line's option names, without --).
KEYS = {"max-on": "max_on", "expect": "expect", "no-fallback": "no_fallback", "max-copy-bytes": "max_copy_bytes",
        "ignore": "ignore", "ignore-op": "ignore_op", "include-plumbing": "include_plumbing",
        "allow-placement-errors": "allow_placement_errors", "max-copy-time": "max_copy_time", "max-busy": "max_busy"}
_SHAPES = {
    "max-on": N_("a table of DEV = N (max-on = {CPU = 0}) or a list of \"DEV=N\""),
    "expect": N_("a table of \"REGEX\" = \"DEV\" (expect = {\"^tower_0/\" = \"GPU:0\"}) or a list of \"REGEX=DEV\""),
    "no-fallback": N_("true or false"),
    "include-plumbing": N_("true or false"),
    "allow-placement-errors": N_("true or false"),
    "max-copy-bytes": N_("a whole number of bytes, 0 or more"),
    "ignore": N_("a regex or a list of regexes"),
    "ignore-op": N_("an op type or a list of op types"),
    "max-copy-time": N_("a time with its unit, as text (\"2ms\", \"500us\")"),
    "max-busy": N_("a table of DEV = PCT (max-busy = {CPU = 10}) or a list of \"DEV=PCT\""),
}


def find(start: Path | None = None) -> Path | None:
    """The pyproject.toml of the project the current folder is in (the nearest one upward), when it
    has a [tool.placement.check] table; a project's own pyproject.toml without one means no rules
    from a file (a folder further up is another project)."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / PYPROJECT
        if candidate.is_file():
            return candidate if _table(_read(candidate), candidate) is not None else None
    return None


def load(path: Path, *, given: bool = False) -> Rules:
    """The rules in ``path``: its [tool.placement.check] table; a file given with --config
    (``given``) that has no such table holds the rules at its top level."""
    document = _read(path)
    table = _table(document, path)
    if table is None:
        if not given:
            return Rules(source=shown_path(path))
        table = document
    unknown = [key for key in table if key not in KEYS]
    if unknown:
        raise RuleError(_("{path}: unknown key {key} in the rules of placement check (known: {known})").format(
            path=path, key=unknown[0], known=", ".join(KEYS)))
    values: dict[str, Any] = {}
    for key, value in table.items():
        if not _shaped(key, value):
            raise RuleError(_("{path}: {key} must be {shape}").format(path=path, key=key,
                                                                      shape=translated(_SHAPES[key])))
        values[KEYS[key]] = value
    try:
        rules = rules_from(**values)
    except RuleError as exc:
        raise RuleError(f"{path}: {exc}") from None
    return replace(rules, source=shown_path(path))


def _shaped(key: str, value: Any) -> bool:
    if key in ("no-fallback", "include-plumbing", "allow-placement-errors"):
        return isinstance(value, bool)
    if key == "max-copy-bytes":
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0
    if key == "max-copy-time":
        return isinstance(value, str)
    if key == "max-busy" and isinstance(value, dict):
        return all(isinstance(n, (int, float)) and not isinstance(n, bool) for n in value.values())
    if key == "max-busy":
        return isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))
    if key == "max-on" and isinstance(value, dict):
        return all(isinstance(n, int) and not isinstance(n, bool) for n in value.values())
    if key == "expect" and isinstance(value, dict):
        return all(isinstance(d, str) for d in value.values())
    if key in ("ignore", "ignore-op") and isinstance(value, str):
        return True
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _read(path: Path) -> dict[str, Any]:
    if path.is_dir():
        raise RuleError(_("{path}: is a directory, not a TOML file").format(path=path))
    try:
        with open(path, "rb") as file:
            data = file.read()
        if data.startswith(codecs.BOM_UTF8):
            raise RuleError(_("{path}: not valid TOML (it starts with a byte order mark: save it as UTF-8 "
                              "without one)").format(path=path))
        return tomllib.loads(data.decode("utf-8"))
    except FileNotFoundError:
        raise RuleError(_("{path}: no such file").format(path=path)) from None
    except OSError as exc:
        raise RuleError(_("{path}: cannot read ({why})").format(path=path, why=exc.strerror or exc)) from None
    except UnicodeDecodeError:
        raise RuleError(_("{path}: not valid TOML (not UTF-8 text: TOML files are UTF-8)").format(path=path)) from None
    except tomllib.TOMLDecodeError as exc:
        raise RuleError(_("{path}: not valid TOML ({why})").format(path=path, why=exc)) from None


def _table(document: dict[str, Any], path: Path) -> dict[str, Any] | None:
    """[tool.placement.check], if the document has one; RuleError when it is not a table."""
    table: Any = document
    for depth, key in enumerate(("tool", "placement", "check"), 1):
        if key not in table:
            return None
        table = table[key]
        if not isinstance(table, dict):
            name = ".".join(("tool", "placement", "check")[:depth])
            raise RuleError(_("{path}: [{name}] must be a table").format(path=path, name=name))
    return cast(dict[str, Any], table)


def is_stdin(path: Path) -> bool:
    """Whether ``path`` is this process's standard input (/dev/stdin, /dev/fd/0, ...)."""
    try:
        here, there = os.stat(path), os.fstat(0)
    except (OSError, ValueError):
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def shown_path(path: Path) -> str:
    """The file as the report names it: relative to the current folder when it is inside it."""
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive
        return str(path)
