"""The gettext catalogue of placement: extract every ``_("...")`` / ``N_("...")`` literal of the
package (with ast), keep placement/locale/zh/LC_MESSAGES/placement.po in step, compile the .mo.

    python tools/catalogue.py update    # add new messages (empty msgstr), drop stale ones
    python tools/catalogue.py compile   # write placement.mo from placement.po
    python tools/catalogue.py check     # exit 1 if a message is missing, untranslated, stale, or the .mo is old
"""

from __future__ import annotations

import ast
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "placement_cli"
PO = PACKAGE / "locale" / "zh" / "LC_MESSAGES" / "placement.po"
MO = PO.with_suffix(".mo")
MARKERS = ("_", "N_")
HEADER = ('msgid ""\nmsgstr ""\n"Project-Id-Version: placement\\n"\n"Language: zh\\n"\n'
          '"MIME-Version: 1.0\\n"\n"Content-Type: text/plain; charset=UTF-8\\n"\n'
          '"Content-Transfer-Encoding: 8bit\\n"\n')


def extract(package: Path = PACKAGE) -> dict[str, list[str]]:
    """Each message marked in the package -> where (file:line). A marker called with anything but
    one string literal is an error: the catalogue could not know its text."""
    found: dict[str, list[str]] = {}
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in MARKERS:
                where = f"{path.relative_to(package.parent)}:{node.lineno}"
                if len(node.args) != 1 or not isinstance(node.args[0], ast.Constant) \
                        or not isinstance(node.args[0].value, str):
                    raise SystemExit(f"{where}: {node.func.id}() needs one string literal")
                found.setdefault(node.args[0].value, []).append(where)
    return found


def _unquote(text: str) -> str:
    return ast.literal_eval(text)


def parse_po(text: str) -> dict[str, str]:
    """msgid -> msgstr of a .po file (the header included, under "")."""
    entries: dict[str, str] = {}
    msgid: str | None = None
    msgstr: str | None = None
    field = None
    for raw in [*text.splitlines(), ""]:
        line = raw.strip()
        if line.startswith("msgid "):
            if msgid is not None and msgstr is not None:
                entries[msgid] = msgstr
            msgid, msgstr, field = _unquote(line[6:]), None, "id"
        elif line.startswith("msgstr "):
            msgstr, field = _unquote(line[7:]), "str"
        elif line.startswith('"'):
            if field == "id":
                msgid = (msgid or "") + _unquote(line)
            elif field == "str":
                msgstr = (msgstr or "") + _unquote(line)
        elif not line or line.startswith("#"):
            field = None if not line else field
    if msgid is not None and msgstr is not None:
        entries[msgid] = msgstr
    return entries


def compile_mo(entries: dict[str, str]) -> bytes:
    """GNU .mo bytes of the translated entries (what msgfmt writes; untranslated ones are left out)."""
    kept = sorted((k, v) for k, v in entries.items() if v)
    ids = b"".join(k.encode() + b"\0" for k, _ in kept)
    strs = b"".join(v.encode() + b"\0" for _, v in kept)
    keys_start = 7 * 4 + 16 * len(kept)
    values_start = keys_start + len(ids)
    offsets: list[int] = []
    position = 0
    for k, _ in kept:
        offsets += [len(k.encode()), keys_start + position]
        position += len(k.encode()) + 1
    position = 0
    for _, v in kept:
        offsets += [len(v.encode()), values_start + position]
        position += len(v.encode()) + 1
    header = struct.pack("Iiiiiii", 0x950412DE, 0, len(kept), 7 * 4, 7 * 4 + 8 * len(kept), 0, 0)
    return header + struct.pack(f"{len(offsets)}i", *offsets) + ids + strs


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'


def write_po(entries: dict[str, str], where: dict[str, list[str]]) -> str:
    parts = [HEADER]
    for msgid in sorted(where, key=lambda m: (where[m][0], m)):
        parts.append(f"#: {' '.join(where[msgid][:3])}\nmsgid {_quote(msgid)}\nmsgstr {_quote(entries.get(msgid, ''))}\n")
    return "\n".join(parts)


def problems() -> list[str]:
    marked = extract()
    entries = parse_po(PO.read_text())
    entries.pop("", None)
    found = [f"untranslated: {m!r} ({marked[m][0]})" for m in marked if not entries.get(m)]
    found += [f"stale (no longer marked in the package): {m!r}" for m in entries if m not in marked]
    if not MO.exists() or MO.read_bytes() != compile_mo(parse_po(PO.read_text())):
        found.append(f"{MO.relative_to(ROOT)} is not compiled from {PO.name}: run tools/catalogue.py compile")
    return found


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "check"
    if command == "update":
        entries = parse_po(PO.read_text()) if PO.exists() else {}
        PO.parent.mkdir(parents=True, exist_ok=True)
        PO.write_text(write_po(entries, extract()))
    elif command == "compile":
        MO.write_bytes(compile_mo(parse_po(PO.read_text())))
    found = problems() if command == "check" else []
    for problem in found:
        print(problem)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
