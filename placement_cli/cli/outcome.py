"""What a command returns, and the exit codes it may end with (frozen: named tuples, which cost a
fifth of a dataclass at every start-up)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from enum import IntEnum
from typing import Any, NamedTuple


class ExitCode(IntEnum):
    OK = 0
    PLACEMENT_FAILED = 1  # TensorFlow could not place the graph, or a run did not produce its result
    USAGE = 2  # bad usage or unreadable input
    INTERNAL = 3  # a bug in placement itself; --traceback shows it
    HUNG_UP = 129  # SIGHUP (the terminal closed), as shells count it
    INTERRUPTED = 130  # Ctrl-C (SIGINT), as shells count it
    TERMINATED = 143  # SIGTERM (kill, a job scheduler), as shells count it


def signalled(signum: int) -> ExitCode:
    """The exit code of a command a signal ended, as shells count it: 128 + its number."""
    return ExitCode(128 + signum)




class Said(NamedTuple):
    """A line on stderr, in its place among what the command prints."""

    text: str


class Json(NamedTuple):
    """One JSON document on stdout."""

    value: Any


class Verbatim(NamedTuple):
    """Printed as it is (TensorFlow's log, a rule): no ASCII stand-ins; ``soft_wrap`` keeps lines whole."""

    renderable: Any
    soft_wrap: bool = False


class Pause(NamedTuple):
    """Wait for Enter before what follows (the demo's steps); the prompt goes to the terminal."""

    prompt: str


class Pictures(NamedTuple):
    """The files a command writes beside what it prints (checked before it runs)."""

    svg: str | None = None
    dot: str | None = None
    graph_svg: str | None = None
    force: bool = False
    command: str = "placement"
    timeline: str | None = None  # a timed run's step: SVG, Chrome trace-event JSON
    chrome_trace: str | None = None


class Ending(NamedTuple):
    """How a command ends once its output is printed: its exit code and the lines said last."""

    code: int = ExitCode.OK
    notices: tuple[str, ...] = ()


class Outcome(NamedTuple):
    """What a command did. ``output`` is printed in order: renderables (tables, panels), Json, Said,
    Verbatim and Pause; a lazy iterable is printed as it is made (the demo's steps run as they are
    shown), and ``finish`` then says how it ended. Then the pictures are written, the notices said,
    and the command exits with its code."""

    code: int = ExitCode.OK  # an ExitCode, or the exit code of the script trace ran
    output: Iterable[Any] = ()
    pictures: Pictures = Pictures()
    graph: Any = None  # what --dot and --graph-svg draw
    notices: tuple[str, ...] = ()
    keep_code: bool = False  # a picture that cannot be written is said, the code stays (trace: the script's)
    finish: Callable[[], Ending] | None = None
    output_closed: bool = False  # nowhere to print (trace: the script closed its stdout): exit with the code
    # the output is a program's too (trace): once a reader closed it, placement says nothing more after the
    # program's own last words; else the notices still say what they say of the inputs
    program_output: bool = False
