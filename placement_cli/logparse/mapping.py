"""``Device mapping:`` blocks: ``DEVICE -> description`` lines, possibly hard-wrapped."""

from placement_cli.logparse import glog

# A description the terminal wrapped ("pci bus\nid: 0000:05:00.0") continues on the
# next line, which then starts with one of the keys TensorFlow prints.
PATTERN = (
    rb"\n" + glog.PREFIX
    + rb"(?:(Device mapping:)[^\n]*+"
    rb"|(/(?:job|device):[^\s]++) -> ([^\n]*?)\\?[ \t\r]*"
    rb"(?:\n[ \t]*((?:id|bus id|pci bus id|compute capability):[^\n]*?)[ \t\r]*)?)$"
)
