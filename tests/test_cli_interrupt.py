"""emit() interrupted (Ctrl-C, SIGTERM) while it prints: the exit code says so, --svg keeps what was
shown, and a run interrupted before it showed anything leaves the user's file as it was (--force)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from rich.text import Text

from placement_cli.cli.emit import emit
from placement_cli.cli.outcome import Outcome, Pictures
from placement_cli.exceptions import Terminated
from processes import patience

STOPS = [(KeyboardInterrupt, 130), (lambda: Terminated(signal.SIGTERM), 143)]


def _stopped(shown: list[Any], stop: Any) -> Iterator[Any]:
    """A command's output that is stopped after ``shown`` (the demo's next step never comes)."""
    yield from shown
    raise stop()


@pytest.mark.parametrize("stop, code", STOPS)
def test_interrupted_before_anything_is_shown_leaves_the_file_as_it_was(tmp_path: Path, stop: Any, code: int) -> None:
    slides = tmp_path / "slides.svg"
    slides.write_text("the user's own slides")
    with pytest.raises(typer.Exit) as ended:
        emit(Outcome(output=_stopped([], stop), pictures=Pictures(svg=str(slides), force=True)))
    assert ended.value.exit_code == code
    assert slides.read_text() == "the user's own slides"


@pytest.mark.parametrize("stop, code", STOPS)
def test_interrupted_keeps_what_was_shown(tmp_path: Path, stop: Any, code: int,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    slides = tmp_path / "slides.svg"
    with pytest.raises(typer.Exit) as ended:
        emit(Outcome(output=_stopped([Text("step one was shown")], stop), pictures=Pictures(svg=str(slides))))
    assert ended.value.exit_code == code
    assert "step one was shown" in capsys.readouterr().out
    drawn = "".join(t.text or "" for t in ET.parse(slides).getroot().iter("{http://www.w3.org/2000/svg}text"))
    assert "step one was shown" in drawn.replace("\xa0", " ")


_EARLY = """
import builtins, os, signal, sys
real = builtins.__import__
def imp(name, *args, **kwargs):
    if name == "typer":  # a Ctrl-C while the command line is still being loaded
        os.kill(os.getpid(), signal.SIGINT)
    return real(name, *args, **kwargs)
builtins.__import__ = imp
sys.argv = ["placement", "parse", "-"]
from placement_cli.entry import main
main()
"""


def test_a_ctrl_c_while_the_command_line_loads_is_exit_130_without_a_traceback() -> None:
    done = subprocess.run([sys.executable, "-c", _EARLY], capture_output=True, text=True, timeout=patience(60), input="")
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "placement: interrupted\n")


@pytest.mark.parametrize("name, code, line", [("SIGTERM", 143, "terminated"), ("SIGHUP", 129, "hung up")])
def test_a_sigterm_or_sighup_while_the_command_line_loads_is_its_exit_code(name: str, code: int, line: str) -> None:
    """SIGTERM and SIGHUP kept their default action until the command's guard was in force: one that
    came while Python loaded the command line (typer, rich: a quarter of a second, seen in a loop of
    random signals on a busy machine) killed the process, a death by signal and no exit code."""
    early = _EARLY.replace("signal.SIGINT", f"signal.{name}")
    done = subprocess.run([sys.executable, "-c", early], capture_output=True, text=True, timeout=patience(60), input="")
    assert (done.returncode, done.stdout, done.stderr) == (code, "", f"placement: {line}\n")


def test_an_ignored_sighup_stays_ignored_while_the_command_line_loads() -> None:
    """``nohup placement ...``: a hang-up while the command line loads is ignored, as it is later."""
    early = _EARLY.replace("signal.SIGINT", "signal.SIGHUP").replace("import builtins, os, signal, sys",
                                                                      "import builtins, os, signal, sys\n"
                                                                      "signal.signal(signal.SIGHUP, signal.SIG_IGN)")
    done = subprocess.run([sys.executable, "-c", early], capture_output=True, text=True, timeout=patience(60),
                          input="a: (MatMul): /job:localhost/replica:0/task:0/device:CPU:0\n")
    assert done.returncode == 0 and "CPU:0" in done.stdout, done.stderr


_SWALLOWED = """
import os, signal, sys
import placement_cli.cli
class Collected:
    def __del__(self):  # Python only reports what a __del__ raises (as a weakref's or an import lock's callback)
        os.kill(os.getpid(), signal.{signal})
        sum(range(1000))
def finished():
    Collected()
    print("the whole report")
    raise SystemExit(0)
placement_cli.cli.main = finished
from placement_cli.entry import main
main()
"""


@pytest.mark.parametrize("name, code, line", [("SIGTERM", 143, "terminated"), ("SIGHUP", 129, "hung up"),
                                              ("SIGINT", 130, "interrupted")])
def test_a_signal_whose_exception_python_swallowed_still_ends_the_command(name: str, code: int, line: str) -> None:
    """A signal that lands while Python runs a callback whose exceptions it only reports (seen: an
    import lock's weakref callback, in a loop of random SIGHUPs on a busy machine) printed "Exception
    ignored ... Traceback" and was lost: the command went on and exited 0 or 1. It ends the command with
    its exit code and line, no traceback."""
    done = subprocess.run([sys.executable, "-c", _SWALLOWED.format(signal=name)], capture_output=True, text=True,
                          timeout=patience(60))
    assert (done.returncode, done.stderr) == (code, f"placement: {line}\n")


_AGAIN = """
import os, signal, sys
import placement_cli.cli
def interrupted():
    raise {stop}
placement_cli.cli.main = interrupted
from placement_cli.entry import main
try:
    main()
finally:  # the same signal again, while the process ends (Python's handlers are the defaults then)
    os.kill(os.getpid(), signal.{signal})
"""


@pytest.mark.parametrize("stop, name, code", [("KeyboardInterrupt", "SIGINT", 130),
                                              ("SystemExit(143)", "SIGTERM", 143), ("SystemExit(129)", "SIGHUP", 129)])
def test_a_second_signal_while_the_process_ends_keeps_its_exit_code(stop: str, name: str, code: int) -> None:
    """A command a signal ended exits with 128 + its number, never by a second one that came during
    Python's shutdown (`cluster` interrupted while it started was seen killed by SIGINT)."""
    done = subprocess.run([sys.executable, "-c", _AGAIN.format(stop=stop, signal=name)], capture_output=True,
                          text=True, timeout=patience(60))
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr


_IN_EXEC = """
import placement_cli.cli
def interrupted():
    exec("raise KeyboardInterrupt")  # as when a Ctrl-C lands while a dataclass or namedtuple is built
placement_cli.cli.main = interrupted
from placement_cli.entry import main
main()
"""


def test_a_ctrl_c_caught_inside_an_exec_keeps_exit_130_under_python_m(tmp_path: Path) -> None:
    """`python -m placement_cli`: CPython kills a process with SIGINT at exit when a KeyboardInterrupt
    ended an exec() of a string, even one the command caught (seen: `cluster` interrupted while it
    started, "placement: interrupted" printed, killed by SIGINT under load)."""
    (tmp_path / "interrupted_in_exec.py").write_text(_IN_EXEC)
    done = subprocess.run([sys.executable, "-m", "interrupted_in_exec"], capture_output=True, text=True,
                          timeout=patience(60), cwd=tmp_path)
    assert (done.returncode, done.stderr) == (130, "placement: interrupted\n")


_AFTER_THE_END = """
import atexit, os, signal, sys
import placement_cli.cli
def finished():
    print("the whole report")
    raise SystemExit(0)
placement_cli.cli.main = finished
from placement_cli.entry import main
class Collected:
    def __del__(self):  # __main__'s names go after Python put the signals' default actions back
        os.kill(os.getpid(), signal.{signal})
        sum(range(1000))
try:
    main()
finally:
    if "{when}" == "atexit":  # as a Ctrl-C landing while TensorFlow's atexit callbacks run
        atexit.register(os.kill, os.getpid(), signal.{signal})
    else:
        left_for_the_end = Collected()
"""


@pytest.mark.parametrize("name, code, line", [("SIGINT", 130, "interrupted"), ("SIGTERM", 143, "terminated"),
                                              ("SIGHUP", 129, "hung up")])
def test_a_signal_while_python_shuts_down_after_the_command_is_one_line_and_its_code(name: str, code: int,
                                                                                       line: str) -> None:
    """The report shown, a Ctrl-C while Python shut down (the last step of `demo` printed, TensorFlow's
    atexit callbacks running) printed "Exception ignored in atexit callback" and a traceback, exit 0.
    It ends the process at once with its line and exit code."""
    done = subprocess.run([sys.executable, "-c", _AFTER_THE_END.format(signal=name, when="atexit")],
                          capture_output=True, text=True, timeout=patience(60))
    assert (done.returncode, done.stdout, done.stderr) == (code, "the whole report\n", f"placement: {line}\n")


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_signal_while_python_takes_its_modules_down_keeps_the_exit_code(name: str) -> None:
    """Later still, once Python put the signals' default actions back and took its modules down
    (TensorFlow's: a second and more), a Ctrl-C killed the process by signal with no line (seen:
    `demo`'s last step shown, exit -2, nine times in ten in a loop of Ctrl-Cs during the step). The
    process now ends with the command's exit code before that stage, its output flushed."""
    done = subprocess.run([sys.executable, "-c", _AFTER_THE_END.format(signal=name, when="teardown")],
                          capture_output=True, text=True, timeout=patience(60))
    assert (done.returncode, done.stdout) == (0, "the whole report\n"), done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("stop, code, line", [(KeyboardInterrupt(), 130, "interrupted"),
                                              (Terminated(signal.SIGTERM), 143, "terminated"),
                                              (Terminated(signal.SIGHUP), 129, "hung up")])
def test_an_error_a_signal_caused_is_that_signal(stop: BaseException, code: int, line: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A Ctrl-C landing while TensorFlow loaded a pybind11 module (`demo`'s first step, 1 run in 10 of a
    loop of Ctrl-Cs) came out as "internal error: ImportError: initialization failed", exit 3: pybind11
    raises that with the interrupt as its cause. An error a signal caused is that signal's ending."""
    from placement_cli.cli.commands import guarded

    def loading() -> Outcome:
        try:
            raise stop
        except BaseException as exc:
            raise ImportError("initialization failed") from exc

    with pytest.raises(typer.Exit) as ended:
        guarded(loading)()
    assert ended.value.exit_code == code
    assert capsys.readouterr().err.strip() == f"placement: {line}"


@pytest.mark.parametrize("name, code, line", [("SIGINT", 130, "interrupted"), ("SIGTERM", 143, "terminated"),
                                              ("SIGHUP", 129, "hung up")])
def test_an_error_a_signal_caused_without_saying_so_is_that_signal(name: str, code: int, line: str,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """TensorFlow Lite's lazy import catches the ImportError a Ctrl-C caused and raises a RuntimeError
    naming it in words only, no exception chained (`demo`'s first step, 1 run in 6 of a loop of
    Ctrl-Cs): "internal error: RuntimeError: ... Previous exceptions: [... 'initialization failed' ...]",
    exit 3. The signal arrived while the command ran: it ends the command as that signal does."""

    def loading() -> Outcome:
        failures = []
        try:
            os.kill(os.getpid(), getattr(signal, name))
            sum(range(100000))  # the handler runs here
        except BaseException as exc:  # as TensorFlow Lite's `except ImportError`, its text kept
            failures.append(str(exc))
        raise RuntimeError(f"Could not import original test/binary location. Previous exceptions: {failures}")

    assert _exit_of(loading) == code
    assert capsys.readouterr().err.strip() == f"placement: {line}"


def test_a_ctrl_c_the_captured_code_swallowed_still_ends_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    """TensorFlow imports ``ssl`` inside ``except ImportError`` and goes on: a Ctrl-C landing there
    (`demo`'s first step, 1 run in 5 of a loop of early Ctrl-Cs) was lost, and the demo waited for
    Enter. A signal the code inside a capture swallowed ends the command when the capture ends."""
    from placement_cli.cli.commands import guarded
    from placement_cli.runtime.capture.fdcapture import capture_fds

    went_on: list[str] = []

    def loading() -> Outcome:
        with capture_fds():
            try:
                os.kill(os.getpid(), signal.SIGINT)
                sum(range(100000))  # the handler runs here
            except BaseException:
                print("Warning: Failed to load ssl module. Continuing without ssl support.")
        went_on.append("the next step")
        return Outcome()

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's own, as the command has it
    try:
        with pytest.raises(typer.Exit) as ended:
            guarded(loading)()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert (ended.value.exit_code, went_on) == (130, [])
    assert capsys.readouterr().err.strip() == "placement: interrupted"


_C_OUTPUT_AT_EXIT = """
import atexit, ctypes
import placement_cli.cli
def finished():
    atexit.register(ctypes.CDLL(None).printf, b"printed by C code at exit\\n")  # as TensorFlow's atexit code may
    raise SystemExit(0)
placement_cli.cli.main = finished
from placement_cli.entry import main
main()
"""


def test_what_c_code_prints_while_python_ends_is_not_lost() -> None:
    """The process ends without Python's last steps, after the atexit callbacks: what C code printed
    there is still in libc's buffer (stdout a file or pipe, not unbuffered) and must be written."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    done = subprocess.run([sys.executable, "-c", _C_OUTPUT_AT_EXIT], capture_output=True, text=True,
                          timeout=patience(60), env=env)
    assert (done.returncode, done.stdout) == (0, "printed by C code at exit\n"), done.stderr


@pytest.mark.parametrize("first, second, code, line", [("SIGINT", "SIGTERM", 130, "interrupted"),
                                                       ("SIGTERM", "SIGINT", 143, "terminated"),
                                                       ("SIGHUP", "SIGTERM", 129, "hung up")])
def test_the_first_signal_decides_when_a_second_lands_while_the_command_ends(
        first: str, second: str, code: int, line: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A Ctrl-C, then a SIGTERM 50 ms later while the command ended its forked child: exit 143, 3 runs
    in 5 (a hostile user's loop of two signals). The signal that ended the command decides its exit."""

    def ending() -> Outcome:
        try:
            os.kill(os.getpid(), getattr(signal, first))
            sum(range(100000))  # the handler runs here
        finally:  # the command's clean-up, where the second one lands
            os.kill(os.getpid(), getattr(signal, second))
            sum(range(100000))
        raise AssertionError("not reached")

    assert _exit_of(ending) == code
    assert capsys.readouterr().err.strip() == f"placement: {line}"


def test_a_second_signal_while_a_forked_child_is_ended_still_reaps_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C landing while a forked half (a diff's second log, a big JSON's second half) was being
    ended left it unreaped (a zombie under a PID 1 that reaps none). The ending holds the signal until
    the child is reaped; the Ctrl-C then ends the command as before."""
    from placement_cli import forked

    monkeypatch.setattr(forked, "available", lambda: True)  # beside the test runner's threads
    kill = os.kill
    children: list[int] = []

    def kill_and_interrupt(pid: int, sig: int) -> None:
        children.append(pid)
        kill(pid, sig)
        # the second signal, while the child is being ended, to this thread (placement forks only where
        # it is the one thread: a signal to the process would go to another thread of the test runner's)
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
        sum(range(100000))

    monkeypatch.setattr(forked.os, "kill", kill_and_interrupt)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt), forked.started(lambda: __import__("time").sleep(60)):
            raise KeyboardInterrupt  # the first Ctrl-C: the child's result is never taken
    finally:
        signal.signal(signal.SIGINT, previous)
    assert children
    with pytest.raises(ChildProcessError):  # reaped: no such child is left, not even a zombie
        os.waitpid(children[0], os.WNOHANG)


def _exit_of(command: Any) -> int:
    """The exit code ``command`` ends with, run as a command with the signal handlers `placement` starts with."""
    from placement_cli.cli.commands import guarded

    mine = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL, signal.SIGHUP: signal.SIG_DFL}
    previous = {sig: signal.signal(sig, handler) for sig, handler in mine.items()}
    try:
        with pytest.raises(typer.Exit) as ended:
            guarded(command)()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return ended.value.exit_code
