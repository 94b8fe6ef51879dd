"""``Device mapping:`` blocks: ``DEVICE -> description`` lines, possibly hard-wrapped."""

from placement_cli.logparse import glog

# A description the terminal wrapped ("pci bus\nid: 0000:05:00.0") continues on the
# next line, which then starts with one of the keys TensorFlow prints. Every repeat is
# possessive and runs to the end of its line, so no line can make the match quadratic
# (a description's trailing blanks and "\" are stripped by the engine, not the regex).
PATTERN = (
    rb"\n" + glog.PREFIX
    + rb"(?:(Device mapping:)[^\n]*+"
    rb"|(/(?:job|device):\S++) -> ([^\n]*+)"
    rb"(?:\n[ \t]*+((?:id|bus id|pci bus id|compute capability):[^\n]*+))?+)"
)


def clean(description: bytes) -> bytes:
    """A description without the line's trailing blanks, CR, or continuation backslash."""
    return description.rstrip(b" \t\r").removesuffix(b"\\").rstrip(b" \t\r")
