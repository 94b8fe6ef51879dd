"""runtime.capture.splitter: which bytes of the C stdio streams are TensorFlow's, decided chunk by chunk."""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st

from placement_cli.logparse import parse_text
from placement_cli.runtime.capture.splitter import HOLD, Splitter

CPU = b"/job:localhost/replica:0/task:0/device:CPU:0"
GPU = b"/job:localhost/replica:0/task:0/device:GPU:0"


def glog(body: bytes, severity: bytes = b"I", source: bytes = b"placer.cc:162") -> bytes:
    return severity + b"0000 00:00:1795270798.642321    6213 " + source + b"] " + body + b"\n"


PLACED = glog(b"MatMul: (MatMul): " + CPU)
EAGER = glog(b"Executing op MatMul in device " + CPU, source=b"execute.cc:1775")
MAPPING = glog(b"Device mapping:", source=b"direct_session.cc:382") + GPU + b" -> device: 0, name: H200, pci bus id: 0000:05:00.0\n"
NOTICE = glog(b"This TensorFlow binary is optimized", source=b"cpu_feature_guard.cc:227") \
    + b"To enable the following instructions: AVX2 FMA, in other operations, rebuild TensorFlow.\n"
ABSL = b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
WARNING = glog(b"something TF warns about", severity=b"W", source=b"op_kernel.cc:1")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def split(chunks: list[bytes], *, stdout: bool = False, level: int = 0, echo: bool = False,
          clock: Clock | None = None) -> tuple[bytes, bytes]:
    """(what reaches the terminal, what the parser gets) for ``chunks`` fed in order."""
    parsed = io.BytesIO()
    splitter = Splitter(parsed, echo_placement=echo, min_level=level, clock=clock or Clock())
    ch = splitter.channel("stdout" if stdout else "stderr", stdout=stdout)
    shown = b""
    for chunk in chunks:
        splitter.feed(ch, chunk)
        shown += ch.take()
    splitter.close(ch)
    return shown + ch.take(), parsed.getvalue()


def test_placement_lines_are_kept_for_the_parser_and_off_the_terminal() -> None:
    shown, parsed = split([b"before\n" + PLACED + EAGER + MAPPING + b"after\n"])
    assert shown == b"before\nafter\n"
    assert parsed == PLACED + EAGER + MAPPING
    report = parse_text(parsed.decode())
    assert [p.kind for p in report.placements] == ["placer", "eager"]
    assert report.device_mapping[0].device == GPU.decode()


def test_a_request_the_placer_ignored_is_kept_for_the_parser_with_the_placements() -> None:
    """Before: shown as any INFO line and never parsed, so trace called the node a soft fallback."""
    ignored = glog(b"Ignoring device specification /device:CPU:0 for node 'read' because the input edge from 'v' "
                   b"is a reference connection and already has a device field set to /device:CPU:1",
                   source=b"colocation_graph.cc:308")
    placed = glog(b"read: (ReadVariableOp): " + CPU.replace(b"CPU:0", b"CPU:1"))
    shown, parsed = split([b"before\n" + ignored + placed + b"after\n"])
    assert shown == b"before\nafter\n" and parsed == ignored + placed
    report = parse_text(parsed.decode())
    assert [(r.node, r.source) for r in report.ignored] == [("read", "v")]
    assert str(report.placements[0].status) == "with its resource"
    assert split([ignored], echo=True) == (ignored, ignored)  # --log shows it, as it shows the placements


def test_with_log_placement_lines_are_shown_too() -> None:
    data = PLACED + MAPPING + b"x\n"
    assert split([data], echo=True) == (data, PLACED + MAPPING)


def test_printf_copies_on_c_stdout() -> None:
    bare = b"MatMul: (MatMul): " + CPU + b"\n"
    shown, parsed = split([b"C library says hi\n" + bare + b"Device mapping: not TF's\n"], stdout=True)
    assert shown == b"C library says hi\nDevice mapping: not TF's\n" and parsed == bare
    assert split([PLACED], stdout=True) == (PLACED, b"")  # glog lines are never on stdout


def test_other_tf_lines_follow_the_scripts_log_level() -> None:
    data = ABSL + NOTICE + WARNING + glog(b"bad", severity=b"E", source=b"x.cc:1") + b"own line\n"
    assert split([data], level=0)[0] == data
    assert split([data], level=1)[0] == data[len(ABSL) + len(NOTICE):]  # the notice's second line too
    assert split([data], level=3)[0] == b"own line\n"
    assert split([PLACED], level=3)[1] == PLACED  # placements are kept whatever the level


def test_a_mapping_block_cut_between_chunks() -> None:
    header, devices = MAPPING.split(b"\n", 1)
    shown, parsed = split([b"a\n" + header + b"\n", devices[:10], devices[10:] + b"b\n"])
    assert shown == b"a\nb\n" and parsed == MAPPING


def test_bytes_are_data() -> None:
    binary = bytes(range(256)) * 4 + b"\0\0\xff\xfe no newline"
    assert split([binary])[0] == binary
    assert split([binary[:100], binary[100:]], stdout=True)[0] == binary


def test_error_lines_are_parsed_and_shown() -> None:
    error = (b"tensorflow.python.framework.errors_impl.InvalidArgumentError: Cannot assign a device for "
             b"operation a: node a was explicitly assigned to /device:GPU:0 but available devices are "
             b"[ /job:localhost/replica:0/task:0/device:CPU:0 ]. \0\n")
    shown, parsed = split([b"x\n" + error])
    assert shown == b"x\n" + error
    report = parse_text(parsed.decode())
    assert report.errors and report.errors[0].node == "a" and b"\0" not in parsed


def test_a_wrapped_error_continues_in_the_next_chunk() -> None:
    first = b"Cannot assign a device to node 'b':\n"
    second = b"Could not satisfy explicit device specification '/device:GPU:0' because no devices matching that specification are registered in this process\n"
    _, parsed = split([first, second])
    assert parsed == first + second
    assert parse_text(parsed.decode()).errors[0].node == "b"


def test_an_uncaught_exceptions_text() -> None:
    parsed = io.BytesIO()
    Splitter(parsed).errors(b"Traceback (most recent call last):\nInvalidArgumentError: Cannot colocate nodes a and b")
    assert parse_text(parsed.getvalue().decode()).errors[0].kind == "colocation"


def test_an_incomplete_line_is_held_only_while_it_may_become_a_tf_line() -> None:
    clock = Clock()
    parsed = io.BytesIO()
    splitter = Splitter(parsed, clock=clock)
    err = splitter.channel("stderr", stdout=False)
    splitter.feed(err, b"\rprogress 50%")  # cannot be the start of a TF line: passed on at once
    assert err.take() == b"\rprogress 50%"
    splitter.feed(err, b"\n" + PLACED[:20])
    assert err.take() == b"\n" and splitter.deadline() == HOLD
    splitter.feed(err, PLACED[20:])  # completed: TF's
    assert err.take() == b"" and parsed.getvalue() == PLACED
    splitter.feed(err, b"I0")
    clock.now = 1.0
    splitter.tick()
    assert err.take() == b"I0"  # held no longer than HOLD
    splitter.feed(err, b"000 rest of a line that was not TF's\n")
    assert err.take() == b"000 rest of a line that was not TF's\n"


CHUNKS = st.lists(st.sampled_from([PLACED, EAGER, MAPPING, NOTICE, ABSL, WARNING, b"own\n", b"\0\xff\n",
                                   b"x: (Op): " + CPU + b"\n", b"Cannot colocate nodes a and b\n"]), max_size=12)


@settings(max_examples=200, deadline=None)
@given(CHUNKS, st.lists(st.integers(min_value=1, max_value=400), max_size=20), st.booleans(), st.integers(0, 3))
def test_chunk_boundaries_change_nothing(lines: list[bytes], cuts: list[int], stdout: bool, level: int) -> None:
    """However the bytes arrive (the clock stands still, so nothing is released early), the
    terminal and the parser get the same bytes as when they arrive at once."""
    data = b"".join(lines)
    pieces, pos = [], 0
    for cut in cuts:
        pieces.append(data[pos : pos + cut])
        pos += cut
    pieces.append(data[pos:])
    assert split([p for p in pieces if p], stdout=stdout, level=level) == split([data], stdout=stdout, level=level)


def test_every_start_of_a_tf_line_is_held() -> None:
    """An incomplete line is held while it may still become any of TF's lines (and not longer)."""
    splitter = Splitter(io.BytesIO())
    err, out = splitter.channel("stderr", stdout=False), splitter.channel("stdout", stdout=True)
    dated = b"2024-01-02 10:00:00.123456: I tensorflow/core/common_runtime/placer.cc:114] a: (Const): " + CPU
    for line in (PLACED, EAGER, ABSL, WARNING, NOTICE.split(b"\n")[0] + b"\n", dated + b"\n"):
        assert all(splitter._may_be_tf(err, line[:n]) for n in range(1, len(line) - 1)), line
    bare = b"MatMul: (MatMul): " + CPU
    assert all(splitter._may_be_tf(out, bare[:n]) for n in range(1, len(bare)))
    assert not any(splitter._may_be_tf(err, text) for text in (b"\rprogress 5%", b"Name: ", b"Epoch 1/10 [===>"))
    assert not any(splitter._may_be_tf(out, text) for text in (b"\rprogress 5%", b"Enter your name: ", b"[1, 2"))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from([b"L3\n", b"L\n", b"X\n", b"F5\nab\ncd", b"E0\n", b"F12\n" + b"\n" * 12]), max_size=8),
       st.integers(1, 7))
def test_the_child_s_control_frames_are_read_whole_however_the_pipe_cuts_them(sent: list[bytes], step: int) -> None:
    """trace and trace --cluster read the child's control pipe with one reader: each frame whole,
    sized payloads with newlines in them too, whatever the reads' sizes."""
    from placement_cli.runtime.trace.child import frames

    data, buf, got = b"".join(sent), bytearray(), []
    for at in range(0, len(data), step):
        buf += data[at:at + step]
        got.extend(frames(buf))
    assert not buf
    assert [kind + (b"%d\n" % len(p) if kind in b"FE" else b"") + p + (b"\n" if kind in b"LX" else b"")
            for kind, p in got] == sent


# A Session's Device mapping on a GPU machine as TensorFlow writes it (recorded on an H200): its list of
# devices ends with a newline and the message with another, so a blank line closes the block.
H200_MAPPING = (glog(b"Device mapping:", source=b"direct_session.cc:382") + GPU
                + b" -> device: 0, name: NVIDIA H200, pci bus id: 0000:00:06.0, compute capability: 9.0a\n\n")


def test_the_blank_line_that_ends_a_gpu_mapping_goes_with_it() -> None:
    """Before: the blank line reached the program's stderr, a line it never wrote."""
    assert split([b"a\n" + H200_MAPPING + b"\nb\n"]) == (b"a\n\nb\n", H200_MAPPING[:-1])
    at = len(H200_MAPPING) - 1
    assert split([H200_MAPPING[:at], H200_MAPPING[at:] + b"b\n"])[0] == b"b\n"  # cut just before it
    assert split([H200_MAPPING + b"b\n"], echo=True)[0] == H200_MAPPING + b"b\n"  # --log shows it all
    cpu = glog(b"Device mapping: no known devices.", source=b"direct_session.cc:378")
    assert split([cpu + b"\nb\n"])[0] == b"\nb\n"  # a mapping of no device ends with no blank line
