"""A comparison's tally of one log's placer records (``placement diff``): one text, a record a line.

A record is a placer line's "node: (Op): device" as printed (the guide era's "node: device"), a
tf.function's behind its name and SEPARATOR; the two copies TensorFlow prints of one placement are
one record. Repeats are kept as lines, so the halves of a parallel read join by concatenation. A
million records take about the size of their text, where counting them in a dict took three times
that; ``sorted_lines`` turns the text into what a comparison walks, once."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

from placement_cli.logparse.functions import SEPARATOR


class Records:
    """One input's placer records, in the order they were settled, repeats kept."""

    __slots__ = ("text", "named", "_lines")

    def __init__(self) -> None:
        self.text = bytearray()
        self.named: bool | None = None  # some record belongs to a tf.function (known once sorted)
        self._lines: list[bytes] | None = None

    def update(self, items: Iterable[bytes] | Records, function: bytes | None = None) -> None:
        """Add ``items`` (records of ``function``, None: of no tf.function), or another Records' text."""
        if isinstance(items, Records):
            self.text += items.text
            return
        prefix = b"" if function is None else function + SEPARATOR
        joined = (b"\n" + prefix).join(items)
        if joined:
            self.text += prefix
            self.text += joined
            self.text += b"\n"

    def counted(self) -> Counter[bytes]:
        """Each record (behind its function's name and SEPARATOR) and how often it was placed; from the
        text, so before ``sorted_lines``."""
        return Counter(bytes(self.text).split(b"\n")[:-1])

    def sorted_lines(self, graph_key: Callable[[bytes], bytes]) -> list[bytes]:
        """The records as ``GRAPH \\0 NODE \\0 REST`` (REST: "(Op): device" or "device"; GRAPH:
        ``graph_key`` of the record's function, b"" for none), sorted: a node's records are next to
        each other, nodes in order of graph and name. Made once (the text is released); a later call
        returns the same list whatever its ``graph_key``."""
        if self._lines is not None:
            return self._lines
        data = bytes(self.text)
        self.text = bytearray()
        self.named = SEPARATOR in data
        lines = data.split(b"\n")
        del data
        lines.pop()  # after the last record's newline
        keys: dict[bytes, bytes] = {}
        for i, line in enumerate(lines):
            if self.named:
                function, sep, record = line.partition(SEPARATOR)
                if not sep:
                    function, record = b"", function
            else:
                function, record = b"", line
            key = keys.get(function)
            if key is None:
                key = keys[function] = graph_key(function) if function else b""
            node, _sep, rest = record.partition(b": ")  # a node's name holds no ": "
            lines[i] = key + b"\0" + node + b"\0" + rest
        lines.sort()
        self._lines = lines
        return lines


def release(records: Records | None) -> None:
    """After a big read, hand the memory its parse freed back to the system: glibc keeps it for the
    process's reuse, so the second input's read would start from the first one's peak, not from what
    its records hold (diff of two million-line logs: 65 MB held, not 90)."""
    if records is None or len(records.text) < BIG:
        return
    try:
        import ctypes  # noqa: PLC0415

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError, TypeError):  # not glibc: nothing to hand back this way
        pass


BIG = 8 << 20  # records of a smaller read: what a trim could hand back is not worth a call
