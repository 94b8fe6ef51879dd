"""Raw input to UTF-8 text: compressed logs, UTF-8/16/32 with or without a BOM, NUL runs,
binary data, overlong lines, terminal colours, Markdown's escapes; then chunks of whole lines,
each with lines of look-ahead."""

from __future__ import annotations

import codecs
import importlib
import os
import re
import stat
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, Protocol

from placement_cli.exceptions import InputError
from placement_cli.i18n import _
from placement_cli.logparse.rejoin import is_record

CHUNK = 2 << 20  # bytes read and parsed at a time; no answer depends on it
SAMPLE = 256 << 10  # text judged (binary or not, wrap width) before anything is parsed
BINARY_SHARE = 0.03  # more control bytes than this in the sample: not a text log
MAX_LINE = 256 << 10  # longer lines keep their head and tail (no record is this long)
_HEAD = _TAIL = 96 << 10
_CUT = b" [...] "
LOOKAHEAD = 48  # lines after a chunk's body, so that multi-line records are seen whole
# Control bytes that do not occur in text (NUL is removed before the count: a crash or
# logrotate's copytruncate leaves runs of NULs in real logs). Kept: \b \t \n \v \f \r ESC.
_TEXT_BYTES = bytes(b for b in range(256) if not (b <= 0x07 or 0x0E <= b <= 0x1A or 0x1C <= b <= 0x1F or b == 0x7F))
# NULs in a row, with no text between them, that a stream of unknown end (a pipe, a device, a
# decompressor) may hold before it is judged endless (/dev/zero): a file on disk ends, whatever its
# holes (copytruncate leaves one as long as the log was).
MAX_NUL_RUN = 256 << 20
_REPLACEMENT = "\ufffd".encode()
_NUL_AT_LINE_START = re.compile(rb"^\0++", re.MULTILINE)
_NUL_RUN = re.compile(rb"\0++")
# Terminal control sequences (ECMA-48), as CI systems, `docker logs` and colourising loggers leave
# them: CSI (colours, cursor moves; a final byte cut off at the line's end too), OSC/DCS/SOS/PM/APC
# strings up to BEL or ST (or the line's end: OSC 8 links), any other ESC sequence, and the C0
# controls that travel with them (SI, BEL, backspace, ...). Tab, CR and the newline stay.
_CONTROL = re.compile(
    rb"\x1b\[[0-?]*+[ -/]*+[@-~]?+"
    rb"|\x1b[\]PX^_][^\x07\x1b\n]*+(?:\x07|\x1b\\)?+"
    rb"|\x1b[ -/]*+[0-~]?+"
    rb"|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]"
)
# Markdown's backslash escapes, which a log pasted into an issue or a chat gets
# (``\_EagerConst: (\_EagerConst): ...``, ``placer.cc:162\] ``): a line holding one of the
# escapes such a paste makes has every escaped ASCII punctuation character unescaped. TensorFlow's
# node, op and device names never hold a backslash, and other lines are left as they are.
_MARKDOWN_HINT = re.compile(rb"\\[_*\[\]`]")
_MARKDOWN_ESCAPE = re.compile(rb"\\([!-/:-@\[-`{-~])")
COMPRESSED = (  # magic, name, module and class (imported only for such a file)
    (b"\x1f\x8b", "gzip", "gzip", "GzipFile"),
    (b"BZh", "bzip2", "bz2", "BZ2File"),
    (b"\xfd7zXZ\x00", "xz", "lzma", "LZMAFile"),
)
_BOMS = (  # longest first: the UTF-32 LE BOM starts with the UTF-16 LE one
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


@dataclass(frozen=True)
class Layout:
    """How a source's bytes become text: found once, at its start."""

    encoding: str = "utf-8"
    bom: int = 0  # bytes of byte-order mark before the text
    compression: str | None = None
    wrap: int | None = None  # the width a console hard-wrapped every longer line at



def stdin_stream() -> BinaryIO:
    """Standard input's bytes, for an input named ``-``; InputError (exit 2) where it is closed (``<&-``:
    Python leaves sys.stdin None)."""
    stream: BinaryIO | None = getattr(sys.stdin, "buffer", None)
    if stream is None:
        raise InputError(_("standard input is closed: nothing to read from -"))
    return stream

def newline(encoding: str) -> bytes:
    """The bytes of "\\n" in an encoding, so a file can be split at a line."""
    return "\n".encode(encoding)


class Readable(Protocol):
    """What Prepend reads from: a binary stream, or a stream that records what is read from it."""

    def read(self, size: int = -1, /) -> bytes: ...


class Prepend:
    """A stream that first gives back bytes already read from it."""

    def __init__(self, head: bytes, stream: Readable) -> None:
        self.head, self.stream = head, stream

    def read(self, size: int = -1) -> bytes:
        if self.head:
            if size is None or size < 0:
                data, self.head = self.head + self.stream.read(), b""
                return data
            data, self.head = self.head[:size], self.head[size:]
            return data
        return self.stream.read(size)

    def readable(self) -> bool:
        return True


def read_full(stream: Any, size: int) -> bytes:
    """Up to ``size`` bytes: pipes and decompressors may return less per read."""
    parts, left = [], size
    while left > 0:
        part = stream.read(left)
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def _utf16_without_bom(head: bytes) -> str | None:
    """UTF-16 text of mostly ASCII characters: every other byte is NUL."""
    sample = head[:4096]
    pairs = len(sample) // 2
    if pairs < 4:
        return None
    even = sample[0 : pairs * 2 : 2].count(0) / pairs
    odd = sample[1 : pairs * 2 : 2].count(0) / pairs
    if odd >= 0.6 and even <= 0.05:
        return "utf-16-le"
    if even >= 0.6 and odd <= 0.05:
        return "utf-16-be"
    return None


def encoding_of(head: bytes) -> tuple[str, int]:
    for bom, encoding in _BOMS:
        if head.startswith(bom):
            return encoding, len(bom)
    return _utf16_without_bom(head) or "utf-8", 0


def decoded(stream: Any, encoding: str, size: int, *, name: str = "", endless: bool = False) -> Iterator[bytes]:
    """UTF-8 blocks of a stream's text, undecodable bytes replaced. NULs at a line's start are
    removed (the hole a crash or logrotate's copytruncate leaves before the text goes on); a run of
    NULs after text on its line becomes one U+FFFD, so no name is glued together from the text
    around a hole. ``endless``: a stream that may never end (not a file on disk) whose NULs run on
    past MAX_NUL_RUN is not a text log (InputError)."""
    decoder = None if encoding == "utf-8" else codecs.getincrementaldecoder(encoding)("replace")
    line_start, nul_run, any_text = True, 0, False
    while True:
        raw = stream.read(size)
        text = raw if decoder is None else decoder.decode(raw, final=not raw).encode("utf-8", "replace")
        if b"\0" in text:
            text = _without_nuls(text, line_start)
            if not text:
                nul_run += len(raw)
                if endless and nul_run > MAX_NUL_RUN:
                    if not any_text:
                        raise InputError(_("{name}: not a text log (only NUL bytes)").format(name=name))
                    raise InputError(_("{name}: not a text log (an endless run of NUL bytes)").format(name=name))
                continue
        if text:
            nul_run, any_text = 0, True
            line_start = text.endswith(b"\n")
            yield text
        if not raw:
            return


def _without_nuls(text: bytes, line_start: bool) -> bytes:
    """``text`` with its NULs removed at line starts (also at its own start when it begins a line)
    and each other run of them replaced by U+FFFD."""
    if not line_start:
        head = len(text) - len(text.lstrip(b"\0"))
        if head:
            text = _REPLACEMENT + text[head:]
    return _NUL_RUN.sub(_REPLACEMENT, _NUL_AT_LINE_START.sub(b"", text))


def needs_cleaning(data: bytes) -> bool:
    """Whether ``clean`` would change ``data``, nearly: two memchr scans in the common case."""
    return b"\x1b" in data or (b"\\" in data and _MARKDOWN_HINT.search(data) is not None)


def clean(data: bytes) -> bytes:
    """Whole lines of text without terminal control sequences and Markdown's escapes (see
    _CONTROL and _MARKDOWN_HINT); line breaks are kept, so line numbers hold."""
    if b"\x1b" in data:
        data = _CONTROL.sub(b"", data)
    if b"\\" in data and _MARKDOWN_HINT.search(data) is not None:
        data = _unescape_markdown(data)
    return data


def _unescape_markdown(data: bytes) -> bytes:
    parts, pos = [], 0
    for hint in _MARKDOWN_HINT.finditer(data):
        if hint.start() < pos:
            continue  # the line was unescaped already
        start = data.rfind(b"\n", 0, hint.start()) + 1
        end = data.find(b"\n", hint.end())
        end = len(data) if end < 0 else end
        parts += [data[pos:start], _MARKDOWN_ESCAPE.sub(rb"\1", data[start:end])]
        pos = end
    parts.append(data[pos:])
    return b"".join(parts)


def _endless(stream: Any) -> bool:
    """Whether a stream may never end: anything but a file on disk (a pipe, /dev/zero)."""
    try:
        return not stat.S_ISREG(os.fstat(stream.fileno()).st_mode)
    except (AttributeError, OSError, ValueError):
        return True


def _is_binary(text: bytes) -> bool:
    sample = text[:SAMPLE]
    return len(sample.translate(None, _TEXT_BYTES)) > BINARY_SHARE * len(sample)


def _chars(line: bytes) -> int:
    return len(line) if line.isascii() else len(line.decode("utf-8", "replace"))


def wrap_width(sample: bytes) -> int | None:
    """The width a console hard-wrapped this log at, if it looks hard-wrapped: no line is
    longer, and many different lines that are not placements are exactly that long."""

    lines = [line.rstrip(b"\r") for line in sample.split(b"\n")[:-1]]
    if not lines:
        return None
    widest = max(map(len, lines))
    if widest < 40:
        return None
    lengths = [_chars(line) if len(line) * 4 >= widest else 0 for line in lines]
    width = max(lengths)
    full = [line for line, n in zip(lines, lengths, strict=True) if n == width]
    long_lines = sum(1 for n in lengths if n * 2 >= width)
    # Rows that differ only in numbers (four GPUs' mapping lines) are alike by chance.
    if width < 40 or len({re.sub(rb"\d", b"", line) for line in full}) < 3 or len(full) * 10 < long_lines:
        return None
    if sum(1 for line in full if is_record(line)) * 2 > len(full):
        return None  # equal-length placement lines, not a wrapped console
    return width


def open_text(stream: BinaryIO, name: str, size: int, note: Callable[[str], None] | None,
              *, empty_ok: bool = False, known_text: bool = False) -> tuple[Layout, Iterator[bytes]] | None:
    """Look at a source's start: its compression, encoding and wrap width, and whether it
    is text at all (InputError if empty or binary, unless ``known_text``: output placement
    captured itself). None for an empty ``empty_ok`` source."""
    head = read_full(stream, max(size, 4096))
    if not head:
        if empty_ok:
            return None
        raise InputError(_("{name}: empty input (0 bytes)").format(name=name))
    compression = None
    source: Any = Prepend(head, stream)
    broken: tuple[type[BaseException], ...] = ()
    for magic, kind, module, opener in () if known_text else COMPRESSED:  # placement's own text: UTF-8 as is
        if head.startswith(magic):
            lib = importlib.import_module(module)
            broken = (OSError, EOFError, ValueError, getattr(lib, "LZMAError", OSError),
                      importlib.import_module("zlib").error)
            opened = getattr(lib, opener)
            compression = kind
            source = opened(fileobj=source, mode="rb") if module == "gzip" else opened(source, mode="rb")
            if note is not None:
                note(_("{name}: {kind}-compressed, reading it decompressed").format(name=name, kind=kind))
            try:
                head = read_full(source, max(size, 4096))
            except broken as exc:
                raise InputError(_("{name}: corrupt {kind} data ({why})").format(name=name, kind=kind, why=exc)) from None
            if not head:
                raise InputError(_("{name}: empty input ({kind} data of 0 bytes)").format(name=name, kind=kind))
            source = Prepend(head, source)
            break
    encoding, bom = ("utf-8", len(codecs.BOM_UTF8) * head.startswith(codecs.BOM_UTF8)) if known_text else encoding_of(head)
    source.read(bom)
    blocks = decoded(source, encoding, size, name=name, endless=compression is not None or _endless(stream))
    sample = b""
    for block in blocks:  # read until the sample is full: a NUL hole may come first
        sample += block
        if len(sample) >= SAMPLE:
            break
    if not sample and not known_text:
        raise InputError(_("{name}: not a text log (only NUL bytes)").format(name=name))
    if _is_binary(sample) and not known_text:
        raise InputError(_("{name}: not a text log (binary data)").format(name=name))
    head_text = clean(sample[: sample.rfind(b"\n", 0, SAMPLE) + 1])
    layout = Layout(encoding, bom, compression, wrap_width(head_text))

    def text() -> Iterator[bytes]:
        yield sample
        if not broken:
            yield from blocks
            return
        try:
            yield from blocks
        except broken as exc:
            raise InputError(_("{name}: corrupt {kind} data ({why})").format(name=name, kind=compression, why=exc)) from None

    return layout, text()


def _shorten(line: bytes) -> bytes:
    return line[:_HEAD] + _CUT + line[-_TAIL:]


class Lines:
    """Whole lines from text blocks, in chunks of at least ``size`` bytes (one line at
    least), each followed by up to LOOKAHEAD more lines that start the next chunk. A line
    over MAX_LINE bytes keeps its head and tail, the same whatever the blocks were. Every
    chunk is ``clean``: what is parsed is what a terminal would have shown."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.head: bytes | None = None  # the start of an overlong line being read
        self.partial = b""  # the line being read (its last _TAIL bytes once overlong)

    def _grow(self, data: bytes) -> None:
        if self.head is not None:
            self.partial = (self.partial + data)[-_TAIL:]
            return
        self.partial += data
        if len(self.partial) > MAX_LINE:
            self.head, self.partial = self.partial[:_HEAD], self.partial[-_TAIL:]

    def _finish(self, rest: bytes) -> bytes:
        line = self.partial + rest
        if self.head is not None:
            line = self.head + _CUT + line[-_TAIL:]
        elif len(line) > MAX_LINE:
            line = _shorten(line)
        self.head, self.partial = None, b""
        return line

    def chunks(self, blocks: Iterator[bytes]) -> Iterator[tuple[bytes, int]]:
        buf = bytearray()  # whole lines not yet in a chunk's body
        for block in blocks:
            first = block.find(b"\n")
            if first < 0:
                self._grow(block)
                continue
            buf += self._finish(block[:first])
            cut = block.rfind(b"\n")
            whole = block[first:cut + 1]  # from the newline that ended the line above
            if _may_hold_long_line(whole):
                parts = whole.split(b"\n")
                if max(map(len, parts)) > MAX_LINE:
                    whole = b"\n".join(_shorten(p) if len(p) > MAX_LINE else p for p in parts)
            buf += whole
            self._grow(block[cut + 1 :])
            if len(buf) >= self.size:
                split = _body_end(buf)
                if split > 0:
                    yield _cleaned(bytes(buf), split)
                    del buf[:split]
        if self.partial or self.head is not None:
            buf += self._finish(b"")
        if buf:
            data = clean(bytes(buf))
            yield data, len(data)


def _cleaned(data: bytes, body_end: int) -> tuple[bytes, int]:
    """A chunk cleaned, and where its body ends then (the look-ahead is cleaned again, the same
    way, as the next chunk's body)."""
    if not needs_cleaning(data):
        return data, body_end
    body = clean(data[:body_end])
    return body + clean(data[body_end:]), len(body)


def _may_hold_long_line(data: bytes) -> bool:
    """A line over MAX_LINE bytes covers a whole half-MAX_LINE window without a newline."""
    half = MAX_LINE // 2
    return any(data.find(b"\n", at, at + half) < 0 for at in range(0, len(data) - half + 1, half))


def _body_end(buf: bytearray) -> int:
    """Where the body ends: LOOKAHEAD whole lines before the end (0: too few lines yet)."""
    end = len(buf) - 1  # buf ends with a newline
    for _step in range(LOOKAHEAD):
        end = buf.rfind(b"\n", 0, end)
        if end < 0:
            return 0
    return end + 1


def layout_of(path: str) -> Layout:
    """How a file's bytes become text (InputError if they do not)."""
    with open(path, "rb") as f:
        opened = open_text(f, path, CHUNK, None)
    assert opened is not None
    return opened[0]


def holds_functions(path: str, limit: int | None = None) -> bool:
    """Whether a file may run a tf.function (its placer lines then need their place read, to know
    whose they are); any compressed or re-encoded file may. ``limit``: its first bytes only."""
    try:
        if not os.path.isfile(path):
            return True
        layout = layout_of(path)
    except Exception:  # noqa: BLE001 - the reader says what is wrong with it, in its words, as it reads it
        return True
    if layout.compression is not None or "16" in layout.encoding or "32" in layout.encoding \
            or os.path.getsize(path) == 0:
        return True
    # read a block at a time (a file mapped whole would count every page of it as this process's memory)
    # also escaped, as a log pasted into Markdown has it: \_\_inference\_
    needles = (b"inference", b"forward")
    overlap = max(map(len, needles)) - 1
    with open(path, "rb") as f:
        before = b""
        while block := f.read(1 << 20 if limit is None else min(1 << 20, limit - f.tell())):
            if any(needle in block or needle in before + block[:overlap] for needle in needles):
                return True
            before = block[-overlap:]
    return False
