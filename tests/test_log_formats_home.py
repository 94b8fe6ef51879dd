"""TensorFlow's log formats are spelled in placement_cli/logparse/ only: every other module imports
logparse's patterns, so what a capture takes off a program's output is what the parser reads.

The check reads each module's string and bytes literals (comments, docstrings and the i18n messages
inside ``_()``/``N_()`` are prose about the formats, not the formats) and looks for what identifies
one of TensorFlow's log lines:

* the literal words of a line: the eager runtime's ``Executing op``, the placer's source file
  ``placer.cc``, the ``Device mapping:`` header, absl's ``absl::InitializeLog`` notice;
* a glog/absl prefix written as a regex: a class of severities (``[IWEF]``, ``[EF]``) or ``E\\d{4}``;
* a device name written as a regex: ``/job:``, ``/device:`` or ``task:`` in a literal that also holds
  regex syntax (``\\d``, ``\\S``, ``[^``, ``(?``), or the mapping's ``(?:job|device)``.

Device names as plain text (``f"/job:{job}/task:{index}"``, a ``--device`` help text) are data, not
a log format, and pass. devices.py parses device names a user types and is no log format either.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "placement_cli"
HOME = PACKAGE / "logparse"
NOT_LOG_FORMATS = {PACKAGE / "devices.py"}  # device names as users type them
MESSAGES = {"_", "N_", "ngettext", "Message"}

WORDS = ("Executing op", "placer.cc", "Device mapping:", "absl::")
PREFIX = re.compile(r"\[[IWEF]{2,4}\]|(?<![A-Za-z])[IWEF]\\d\{4\}")  # a severity class, any severity's header
DEVICE_REGEX = re.compile(r"(?:/job:|/device:|task:).*(?:\\[dDsS]|\[\^|\(\?)|(?:\\[dDsS]|\[\^|\(\?).*(?:/job:|/device:|task:)"
                          r"|\(\?:job\|device\)")


def _literals(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of every str/bytes literal that is code, not prose."""
    prose: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                prose.add(id(first.value))
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) in MESSAGES:
            for arg in ast.walk(node):
                if isinstance(arg, ast.Constant):
                    prose.add(id(arg))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)) and id(node) not in prose:
            text = node.value.decode("latin-1") if isinstance(node.value, bytes) else node.value
            found.append((node.lineno, text))
    return found


def spellings(source: str) -> list[str]:
    """The literals of a module's source that spell one of TensorFlow's log lines."""
    said = []
    for line, text in _literals(ast.parse(source)):
        if any(word in text for word in WORDS) or PREFIX.search(text) or DEVICE_REGEX.search(text):
            said.append(f"line {line}: {text!r}")
    return said


@pytest.mark.parametrize("path", sorted(p for p in PACKAGE.rglob("*.py")
                                        if HOME not in p.parents and p not in NOT_LOG_FORMATS),
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_outside_logparse_spells_a_tensorflow_log_line(path: Path) -> None:
    assert spellings(path.read_text(encoding="utf-8")) == []


def test_the_check_finds_what_it_looks_for() -> None:
    """Each kind of spelling the check names is found, in str and bytes, and prose is not."""
    found = [
        'X = re.compile(r"Executing op (\\w+) on task")',
        'X = (b"Executing op ", b"Device mapping:")',
        'X = re.compile(r"\\s*I\\d{4} ")',
        'X = re.compile(r"\\s*[EF]\\d{4} ")',
        'X = re.compile(r"^W\\d{4} ")',
        'X = rb"(?P<sev>[IWEF])\\d{4} "',
        'X = re.compile(r"/job:worker/replica:\\d+/task:(\\d+)")',
        'X = rb"/(?:job|device):\\S++ -> "',
        'X = b"simple_placer.cc"',
    ]
    for source in found:
        assert spellings(source), source
    prose = [
        'def f():\n    """Reads ``Executing op X in device D`` lines (placer.cc)."""',
        'X = _("Device mapping: no known devices")',
        'X = f"/job:{job}/task:{index}"',
        'X = "--device: give a device type or a device, e.g. GPU, CPU:0, /job:ps or ps/0"',
        '# Executing op X in device /job:localhost/replica:0/task:0/device:CPU:0\nX = 1',
    ]
    for source in prose:
        assert not spellings(source), source
    assert spellings((HOME / "glog.py").read_text(encoding="utf-8"))  # logparse itself spells them
