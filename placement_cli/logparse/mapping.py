"""``Device mapping:`` blocks: ``DEVICE -> description`` lines, possibly hard-wrapped."""

import re

from placement_cli.logparse import glog

HEADER = b"Device mapping:"
# One device's line: ``/job:localhost/replica:0/task:0/device:GPU:0 -> device: 0, name: ...``
_NAME = rb"/(?:job|device):\S++"
ENTRY = _NAME + rb" -> "

# A description the terminal wrapped ("pci bus\nid: 0000:05:00.0") continues on the
# next line, which then starts with one of the keys TensorFlow prints. Every repeat is
# possessive and runs to the end of its line, so no line can make the match quadratic
# (a description's trailing blanks and "\" are stripped by the engine, not the regex).
PATTERN = (
    rb"\n" + glog.PREFIX
    + rb"(?:(" + re.escape(HEADER) + rb")[^\n]*+"
    rb"|(" + _NAME + rb") -> ([^\n]*+)"
    rb"(?:\n[ \t]*+((?:id|bus id|pci bus id|compute capability):[^\n]*+))?+)"
)


def clean(description: bytes) -> bytes:
    """A description without the line's trailing blanks, CR, or continuation backslash."""
    return description.rstrip(b" \t\r").removesuffix(b"\\").rstrip(b" \t\r")
