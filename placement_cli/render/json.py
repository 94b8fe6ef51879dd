"""JSON rendering of a Report (the schema SPEC.md fixes)."""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Callable
from typing import Any

from placement_cli.collector import paused
from placement_cli.filters import Filtered
from placement_cli.messages import LONE_SURROGATE
from placement_cli.model import Report
from placement_cli.model.diff import Rows


def report_dict(report: Report, *, run: bool = False, filtered: Filtered | None = None) -> dict[str, Any]:
    """The report as data. Filtered: ``placements`` and ``summary`` describe what matched, ``filters``
    says which filters applied, and ``summary.unfiltered_placements`` counts them all."""
    data = report.to_dict(run=run)
    if filtered is not None and filtered.filters.active:
        data["filters"] = filtered.filters.to_dict()
        data["summary"]["unfiltered_placements"] = filtered.total
        if filtered.report.sessions_numbered:
            data["summary"]["sessions_numbered"] = True
    return data


def render_json(report: Report, *, run: bool = False, filtered: Filtered | None = None,
                ascii_only: bool = False) -> str:
    """One JSON document; run commands add requested/status/reason, result and log."""
    return dumps(report_dict(report, run=run, filtered=filtered), ascii_only=ascii_only)


def dumps(data: Any, *, ascii_only: bool = False) -> str:
    """The one JSON writer of every command: strict JSON, which every parser reads (``jq``,
    JavaScript, strict libraries). A number that is not finite (a diverged loss, an infinite
    ratio) has no JSON spelling: it is written as null, and the document's ``non_finite`` lists
    each one, its place (a jq path) and what it was (``NaN``, ``Infinity``, ``-Infinity``).
    ``ascii_only``: \\u escapes for a stream that cannot encode every character (still lossless).
    A lone surrogate (a saved report's string may hold one) is always written as its \\u escape: no
    UTF-8 stream encodes it, and JSON spells it so.
    A list of ROWS objects or more in the top-level object is written one object a line."""
    if _long(data):
        buffer = io.StringIO()
        write(data, buffer, ascii_only=ascii_only)
        return buffer.getvalue()
    try:  # the usual case, at full speed: every number is finite
        return lone_escaped(json.dumps(data, indent=2, ensure_ascii=ascii_only, allow_nan=False))
    except ValueError:
        pass
    found: list[dict[str, str]] = []
    data = finite(data, "", found)
    if found and isinstance(data, dict):
        data = {**data, "non_finite": found}
    return lone_escaped(json.dumps(data, indent=2, ensure_ascii=ascii_only, allow_nan=False))


def lone_escaped(text: str) -> str:
    """JSON ``text`` with each lone surrogate written as its \\u escape (in JSON text one can only stand
    in a string, where the escape is its spelling); ASCII text, the usual case, is returned as it is."""
    if text.isascii() or LONE_SURROGATE.search(text) is None:
        return text
    return LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


# A list of at least this many objects (a report's placements, a diff's rows) is written one object a
# line, by json's C encoder (its indenting encoder is pure Python: 20 s for a million rows), and written
# as it is encoded, BATCH objects at a time (a million rows are never one string).
ROWS = 64
BATCH = 4096


def _long(data: Any) -> set[str]:
    """The keys of the top-level object whose values are long lists of objects (or Rows, any length)."""
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        return set()
    return {k for k, v in data.items() if isinstance(v, Rows) or _rows(v)}


def write(data: Any, out: Any, *, ascii_only: bool = False) -> None:
    """``dumps(data)`` written to ``out`` piece by piece."""
    long = _long(data)
    if not long:
        out.write(dumps(data, ascii_only=ascii_only))
        return
    quote = json.encoder.encode_basestring_ascii if ascii_only else json.encoder.encode_basestring  # type: ignore[attr-defined]
    found: list[dict[str, str]] = []
    out.write("{")
    for n, (key, value) in enumerate(data.items()):
        path = f".{key}" if _IDENTIFIER.fullmatch(key) else f".[{json.dumps(key)}]"
        out.write(f"{',' if n else ''}\n  {lone_escaped(quote(key))}: ")
        if key not in long:
            try:
                text = json.dumps(value, indent=2, ensure_ascii=ascii_only, allow_nan=False)
            except ValueError:
                text = json.dumps(finite(value, path, found), indent=2, ensure_ascii=ascii_only, allow_nan=False)
            out.write(lone_escaped(text.replace("\n", "\n  ")))
            continue
        row = _row_encoder(ascii_only)
        out.write("[\n    " if len(value) else "[")
        with paused():  # a batch's rows and their parts: many objects, no cycles
            _write_rows(value, path, row, quote, found, out)
        out.write("\n  ]" if len(value) else "]")
    if found:
        out.write(',\n  "non_finite": ' + json.dumps(found, indent=2, ensure_ascii=ascii_only).replace("\n", "\n  "))
    out.write("\n}")


def _write_rows(value: Any, path: str, row: Callable[[Any, int], Any], quote: Callable[[str], str],
                found: list[dict[str, str]], out: Any) -> None:
    """A long list's rows, BATCH at a time (each batch's texts joined before it is written)."""
    for start in range(0, len(value), BATCH):
        try:
            if isinstance(value, Rows):  # a diff's rows: written the fastest way they know
                text = ",\n    ".join(value.texts(slice(start, start + BATCH), quote,
                                                  lambda item: "".join(row(item, 0))))
            else:
                text = ",\n    ".join(["".join(row(item, 0)) for item in value[start : start + BATCH]])
        except ValueError:
            batch = value[start : start + BATCH]
            text = ",\n    ".join(["".join(row(finite(item, f"{path}[{start + i}]", found), 0))
                                   for i, item in enumerate(batch)])
        out.write((",\n    " if start else "") + lone_escaped(text))


def _rows(value: Any) -> bool:
    return isinstance(value, list) and len(value) >= ROWS and all(type(item) is dict for item in value)


def _row_encoder(ascii_only: bool) -> Any:
    """json's own C encoder, made once: one compact object per call (a non-finite number: ValueError)."""
    c_make = getattr(json.encoder, "c_make_encoder", None)
    encoder = json.JSONEncoder(ensure_ascii=ascii_only, allow_nan=False)
    if c_make is None:  # pragma: no cover - an interpreter without json's C speed-ups
        return lambda item, _level: (encoder.encode(item),)
    quote = json.encoder.encode_basestring_ascii if ascii_only else json.encoder.encode_basestring  # type: ignore[attr-defined]

    def no_default(o: Any) -> Any:
        raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")

    return c_make(None, no_default, quote, None, ": ", ", ", False, False, False)


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def finite(data: Any, path: str, found: list[dict[str, str]]) -> Any:
    """``data`` with every non-finite float as None, each one noted in ``found`` with its jq path
    (``path``: that of ``data``, "" for the document)."""
    if isinstance(data, float) and not math.isfinite(data):
        found.append({"path": path or ".", "value": "NaN" if math.isnan(data) else "Infinity" if data > 0 else "-Infinity"})
        return None
    if isinstance(data, dict):  # a key is text in JSON: a non-finite float key is written as Python spells it
        return {str(k) if isinstance(k, float) else k: finite(v, f"{path}.{k}" if isinstance(k, str) and
                _IDENTIFIER.fullmatch(k) else f"{path or '.'}[{json.dumps(str(k))}]", found) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [finite(v, f"{path or '.'}[{i}]", found) for i, v in enumerate(data)]
    return data
