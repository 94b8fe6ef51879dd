"""``Device mapping:`` blocks: ``DEVICE -> description`` lines, possibly hard-wrapped."""

# A description the terminal wrapped ("pci bus\nid: 0000:05:00.0") continues on the
# next line, which then starts with one of the keys TensorFlow prints.
PATTERN = (
    rb"(?:(Device mapping:)[^\n]*"
    rb"|(/(?:job|device):[^\s]+) -> ([^\n]*?)\\?[ \t\r]*"
    rb"(?:\n[ \t]*((?:id|bus id|pci bus id|compute capability):[^\n]*?)[ \t\r]*)?)$"
)
GROUPS = 4  # header, device, description, continuation
