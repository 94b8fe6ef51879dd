"""What trace's splitter and the capture call a TensorFlow placement line is what the parser reads as
one: a line they take off the program's output is always parsed into a placement (else it would be
lost: neither shown nor counted), and a line as TensorFlow writes it that the parser reads is taken.

Node and op names are drawn from TensorFlow's characters and from characters no name may hold; the
parser also reads lines TensorFlow never writes (Markdown escapes, terminal colours: see
test_parse_dialects.py), so those characters are in the first property only.
"""

from __future__ import annotations

import io

from hypothesis import example, given, settings
from hypothesis import strategies as st

from placement_cli.logparse import parse_text
from placement_cli.runtime.capture.fdcapture import is_placement_text, separate
from placement_cli.runtime.capture.splitter import Splitter

# absl's prefix (TensorFlow >= 2.16) and glog's (older), the placer's file bare or with its folders
GLOGS = [b"I0000 00:00:1795232759.847888    3899 ", b"2024-01-02 10:00:00.123456: I tensorflow/core/common_runtime/"]
DEVICES = [b"/job:localhost/replica:0/task:0/device:CPU:0", b"/job:worker/replica:0/task:1/device:GPU:3",
           b"/job:localhost/replica:0/task:0/device:_CUSTOM:0", b"/job:ps/task:0/cpu:0",
           b"/job:localhost/replica:0/task:0/device:CPU:", b"/job:/device:CPU:0"]
_TF = "Aa0_.-/>:<"  # what TensorFlow's names hold (":" inside a node's name; "<", ">" in ops)
_HOSTILE = "*()[] \t'\"é,;=#+~"
_ESCAPES = ["\\", "\x1b", "\x1b[0m", "\\_"]


def _names(alphabet: str, extra: list[str] | None = None) -> st.SearchStrategy[str]:
    pieces = st.sampled_from(list(alphabet) + (extra or []))
    return st.one_of(st.sampled_from(["MatMul", "_Arg", "__inference_<lambda>_9", "a/b:1", "x.y", "_MklMatMul"]),
                     st.lists(pieces, min_size=0, max_size=12).map("".join))


def _line(alphabet: str, extra: list[str] | None = None) -> st.SearchStrategy[tuple[str, bytes, bool]]:
    """(kind, line without its newline, whether it is exactly as TensorFlow 2 writes a placer copy):
    a placer record, bare or glog, or an eager runtime line."""
    node, op = _names(alphabet, extra), _names(alphabet, extra)
    device = st.sampled_from(DEVICES)
    end = st.sampled_from([b"", b" ", b"\r", b" \t"])
    placer_body = st.builds(lambda n, o, d, tf1, e: (n.encode() + b": (" + o.encode() + (b")" if tf1 else b"): ")
                                                     + d + e, not tf1 and not e),
                            node, op, device, st.booleans(), end)
    eager = st.builds(lambda o, d, e: b"Executing op " + o.encode() + b" in device " + d + e, op, device, end)
    glog = st.sampled_from(GLOGS)
    return st.one_of(
        placer_body.map(lambda body: ("bare", *body)),
        st.builds(lambda g, body: ("glog", g + b"placer.cc:162] " + body[0], body[1]), glog, placer_body),
        st.builds(lambda g, body: ("glog", g + b"execute.cc:1931] " + body, True), glog, eager),
    )


def _parsed(line: bytes) -> bool:
    return bool(parse_text(line.decode("utf-8", "replace") + "\n").placements)


def _split(kind: str, line: bytes) -> bool:
    """Whether trace's splitter takes the line off the program's output."""
    splitter = Splitter(io.BytesIO())
    channel = splitter.channel(kind, stdout=kind == "bare")
    splitter.feed(channel, line + b"\n")
    splitter.close(channel)
    return channel.take() == b""


def _captured(kind: str, line: bytes) -> bool:
    """Whether capture() takes the line (a bare copy: as when no glog twin can say, INFO hidden)."""
    fd = 1 if kind == "bare" else 2
    separated = separate({fd: line + b"\n"}, info_hidden=True)
    taken = separated.tensorflow[fd].strip() != b""
    assert taken == (separated.shown[fd] == b"")
    return taken


@settings(max_examples=400, deadline=None)
@given(_line(_TF + _HOSTILE, _ESCAPES))
def test_a_line_taken_off_the_output_is_a_placement_the_parser_reads(case: tuple[str, bytes, bool]) -> None:
    kind, line, _ = case
    parsed = _parsed(line)
    assert not _split(kind, line) or parsed, line
    assert not _captured(kind, line) or parsed, line
    if kind == "bare":
        assert not is_placement_text(line + b"\n") or parsed, line


@settings(max_examples=400, deadline=None)
@given(_line(_TF + _HOSTILE))
@example(("bare", b" A: (MatMul): /job:localhost/replica:0/task:0/device:CPU:0", True))
def test_a_placement_line_the_parser_reads_is_taken_off_the_output(case: tuple[str, bytes, bool]) -> None:
    """capture() runs TensorFlow 2, which writes no TF 1.x ``(Op)/job:`` and no blank at a placer
    line's end: it takes placer lines in TensorFlow 2's exact shape only."""
    kind, line, exact = case
    parsed = _parsed(line)
    if kind == "bare" and line[:1].isspace():  # TensorFlow writes none: a program's indented text (the parser,
        assert not _split(kind, line), line   # reading pasted logs, strips the blanks)
        return
    assert _split(kind, line) == parsed, line
    if exact:
        assert _captured(kind, line) == parsed, line
    if kind == "bare":
        assert is_placement_text(line + b"\n") == parsed, line


# What sits between a placer record's op and its device: TensorFlow 2's ``): ``, TensorFlow 1's ``)``,
# and shapes it never writes (no blank, two blanks, a tab): the parser reads none of the last.
_SEPARATORS = [b"): ", b")", b"):", b"):  ", b"):\t"]
# A Device mapping header as TensorFlow writes it, and lookalikes the parser does not read as one.
_HEADERS = [b"Device mapping:", b"Device mapping: no known devices.", b"Device mapping", b"Device mappings:",
            b"device mapping:"]
_SOURCES = [b"placer.cc:162", b"simple_placer.cc:841", b"direct_session.cc:382", b"xplacer.cc:1"]


@settings(max_examples=300, deadline=None)
@given(_names(_TF + _HOSTILE), _names(_TF), st.sampled_from(DEVICES), st.sampled_from(_SEPARATORS),
       st.sampled_from(GLOGS), st.sampled_from(_SOURCES))
@example(node=" A", op="MatMul", device=DEVICES[0], separator=b"): ", prefix=GLOGS[0], source=_SOURCES[0])
def test_the_text_between_op_and_device_is_read_alike(node: str, op: str, device: bytes, separator: bytes,
                                                      prefix: bytes, source: bytes) -> None:
    """A placer record taken off the output, bare or glog, is one the parser reads; and one the parser
    reads from the placer's own file in a shape TensorFlow writes is taken."""
    body = node.encode() + b": (" + op.encode() + separator + device
    for kind, line in (("bare", body), ("glog", prefix + source + b"] " + body)):
        parsed = _parsed(line)
        # TensorFlow writes a record at the start of its line: a name starting with a blank is a
        # program's indented text to the splitter (the parser, reading pasted logs, strips it)
        written = (separator in (b"): ", b")") and (kind == "bare" or source.startswith((b"placer", b"simple_placer")))
                   and not node[:1].isspace())
        assert not _split(kind, line) or parsed, line
        assert not _captured(kind, line) or parsed, line
        if written:
            assert _split(kind, line) == parsed, line
        if written and separator == b"): ":
            assert _captured(kind, line) == parsed, line


def _mapping_read(text: bytes) -> tuple[bool, int]:
    report = parse_text(text.decode("utf-8", "replace"))
    return report.mapping_seen, len(report.device_mapping)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(_HEADERS), st.sampled_from(GLOGS),
       st.lists(st.sampled_from(DEVICES[:4]), min_size=0, max_size=3, unique=True))
def test_a_device_mapping_block_is_taken_as_the_parser_reads_it(header: bytes, prefix: bytes,
                                                                devices: list[bytes]) -> None:
    """The header (a glog line) and its device lines: the splitter and capture() take them off the
    output exactly when the parser reads the block, the header as one and every device. (The parser
    also reads a device line with no header before it, which TensorFlow never writes.)"""
    entries = [device + b" -> device: " + str(i).encode() + b", name: X, pci bus id: 0000:05:00.0"
               for i, device in enumerate(devices)]
    head = prefix + b"direct_session.cc:382] " + header + b"\n"
    block = head + b"".join(e + b"\n" for e in entries)
    seen = _mapping_read(head)[0]
    read = _mapping_read(block)[1]
    splitter = Splitter(io.BytesIO())
    channel = splitter.channel("stderr", stdout=False)
    splitter.feed(channel, block)
    splitter.close(channel)
    split_taken = channel.take() == b""
    separated = separate({2: block}, info_hidden=False)
    captured = separated.shown[2] == b""
    whole = seen and read == len(devices)
    assert split_taken == whole, block
    assert captured == whole, block
    # unprefixed, as TensorFlow's Python listener writes it under IPython
    bare = header + b"\n" + b"".join(e + b"\n" for e in entries)
    assert is_placement_text(bare) == (_mapping_read(header + b"\n")[0] and _mapping_read(bare)[1] == len(devices)), bare
