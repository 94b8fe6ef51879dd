"""Signals, terminals, closed pipes and leftovers: `placement trace` ends with its script, passes
each signal it gets to the script once, and leaves no process or file behind. No TensorFlow."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from trace_helpers import TRACE, Terminal, assert_clean, environment, run, wait_gone, write
from processes import patience

# Ready once it has the terminal, where it has one: placement hands it over after starting the script.
FOREGROUND = r'''
import os, time
def _foreground():
    try:
        return os.tcgetpgrp(0) == os.getpgrp()
    except OSError:  # no terminal, or not this session's: nothing to wait for
        return True
_end = time.monotonic() + 300  # ends a hang only (a loaded machine)
while not _foreground() and time.monotonic() < _end:
    time.sleep(0.01)
'''

# Counts the signals it gets (and notes each in the file "got"); a KeyboardInterrupt runs a slow
# cleanup, which a second SIGINT would kill.
PATIENT = FOREGROUND + r'''
import os, signal, sys, time
got = []
def note(sig, frame):
    got.append(signal.Signals(sig).name)
    print("got", got[-1], flush=True)
    with open("got", "a") as f:
        f.write(got[-1] + " ")
for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1):
    signal.signal(sig, note)
try:
    open("pid", "w").write(str(os.getpid()))
    print("READY", flush=True)
    while len(got) < int(sys.argv[1]):
        time.sleep(0.02)
    time.sleep(0.3)  # not a wait for anything: a signal delivered twice would be counted in this window
    print("done", got, flush=True)
except KeyboardInterrupt:
    print("cleaning up", flush=True)
    time.sleep(1)
    print("checkpoint saved", got, flush=True)
'''


def _lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def _reading_stdin(pid: int) -> bool:
    """Blocked in read(0, ...) (x86-64: system call 0), as /proc shows the main thread."""
    try:
        return Path(f"/proc/{pid}/syscall").read_text().startswith("0 0x0 ")
    except OSError:
        return False


def _catches(pid: int, signals: tuple[int, ...]) -> bool:
    """The process has a handler installed for each of ``signals`` (its SigCgt mask)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
    return all(caught >> (sig - 1) & 1 for sig in signals)


def poll_until(ready: Callable[[], bool], what: str, timeout: float = 60) -> None:
    """Wait, up to ``timeout`` seconds, until ``ready()``: a bounded wait on a condition."""
    timeout = patience(timeout)
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f"not {what} within {timeout:.0f} s"
        time.sleep(0.02)


def start(tmp: Path, *args: str) -> subprocess.Popen[bytes]:
    """placement in a session (and process group) of its own, output piped, until the script
    has set itself up (its pid written) and placement forwards signals (its handlers are
    installed once the script runs)."""
    proc = subprocess.Popen([*TRACE, *args], cwd=tmp, env=environment(tmp), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)

    def ready() -> bool:
        assert proc.poll() is None, proc.communicate()
        started = (tmp / "pid").exists() and (tmp / "pid").read_text()
        return bool(started) and _catches(proc.pid, (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1))

    poll_until(ready, "started")
    return proc


@pytest.mark.parametrize("by_group", [False, True], ids=["by pid", "by process group"])
def test_each_signal_reaches_the_script_once(tmp_path: Path, by_group: bool) -> None:
    write(tmp_path, PATIENT)
    proc = start(tmp_path, "--json", "prog.py", "3")
    child = int((tmp_path / "pid").read_text())
    for n, sig in enumerate((signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1), start=1):
        (os.killpg if by_group else os.kill)(proc.pid, sig)
        # the next one once the script got this one: pending signals are delivered lowest number first
        poll_until(lambda n=n: len(_lines(tmp_path / "got")) >= n, f"{n} signals received")
    out, err = proc.communicate(timeout=patience(30))
    assert proc.returncode == 0, err
    assert b"done ['SIGTERM', 'SIGHUP', 'SIGUSR1']" in err  # --json: the program's stdout on stderr
    assert json.loads(out)["exit_code"] == 0
    assert wait_gone(child)
    assert_clean(tmp_path)


@pytest.mark.parametrize("by_group", [False, True], ids=["by pid", "by process group"])
def test_sigint_reaches_the_scripts_cleanup_once(tmp_path: Path, by_group: bool) -> None:
    write(tmp_path, PATIENT)
    proc = start(tmp_path, "prog.py", "99")
    (os.killpg if by_group else os.kill)(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=patience(30))
    assert b"checkpoint saved []" in out, err  # its except KeyboardInterrupt: ran to its end
    assert proc.returncode == 0 and b"exited with code 0" in out
    assert wait_gone(int((tmp_path / "pid").read_text()))
    assert_clean(tmp_path)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_script_that_dies_of_the_signal_still_gets_its_report(tmp_path: Path, sig: int) -> None:
    write(tmp_path, "import os, time\nprint('READY', flush=True)\nopen('pid', 'w').write(str(os.getpid()))\ntime.sleep(600)\n")
    proc = start(tmp_path, "--json", "prog.py")
    os.kill(proc.pid, sig)
    out, err = proc.communicate(timeout=patience(30))
    assert proc.returncode == 128 + sig, err
    assert json.loads(out)["exit_code"] == 128 + sig
    assert wait_gone(int((tmp_path / "pid").read_text()))
    assert_clean(tmp_path)


def test_placement_killed_outright_takes_the_script_with_it(tmp_path: Path) -> None:
    write(tmp_path, PATIENT)
    proc = start(tmp_path, "prog.py", "99")
    child = int((tmp_path / "pid").read_text())
    proc.kill()
    proc.wait(timeout=patience(10))
    assert wait_gone(child)
    assert_clean(tmp_path)


def test_a_closed_pipe_ends_nothing_but_the_script_as_python_would(tmp_path: Path) -> None:
    """`placement trace many.py | head -1`: the script gets its BrokenPipeError as under plain
    python; placement neither hangs nor prints a traceback of its own."""
    write(tmp_path, "import os\nopen('pid', 'w').write(str(os.getpid()))\nfor i in range(10**7):\n    print('line', i)\n")
    results = []
    for command in ([sys.executable, "prog.py"], [*TRACE, "prog.py"]):
        shell = subprocess.run(["sh", "-c", '"$@" | head -1; echo "status $?"', "sh", *command], cwd=tmp_path,
                               env=environment(tmp_path), capture_output=True, timeout=patience(60), check=False)
        results.append(shell)
        assert shell.stdout.startswith(b"line 0\n")
        assert wait_gone(int((tmp_path / "pid").read_text()))
    plain, traced = results
    assert b"placement_cli" not in traced.stderr and b"internal error" not in traced.stderr
    assert traced.stderr.splitlines()[-1] == plain.stderr.splitlines()[-1]  # the script's own BrokenPipeError
    exit_codes = []
    for command in ([sys.executable, "prog.py"], [*TRACE, "prog.py"]):
        proc = subprocess.Popen(command, cwd=tmp_path, env=environment(tmp_path), stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
        assert proc.stdout is not None
        proc.stdout.readline()
        proc.stdout.close()
        exit_codes.append(proc.wait(timeout=patience(60)))
    assert exit_codes[1] == exit_codes[0]  # the script's, as plain python gives it
    assert_clean(tmp_path)


def test_helpers_that_end_with_the_script_are_not_said_to_run_on(tmp_path: Path) -> None:
    """A spawn pool's resource tracker ends a few milliseconds after the script: no false note."""
    write(tmp_path, ("import multiprocessing as mp\n\ndef square(x):\n    return x * x\n\n"
                     "if __name__ == '__main__':\n    mp.set_start_method('spawn')\n"
                     "    with mp.Pool(2) as pool:\n        print(pool.map(square, range(4)))\n"))
    for _ in range(3):  # the tracker's end races the script's: each run could lose it
        proc = run([*TRACE, "prog.py"], tmp_path)
        assert proc.returncode == 0 and proc.stdout.startswith(b"[0, 1, 4, 9]\n"), proc.stderr
        assert b"still running" not in proc.stderr
    assert_clean(tmp_path)


def test_a_background_process_holding_the_output_does_not_hold_placement(tmp_path: Path) -> None:
    write(tmp_path, (
        "import os, subprocess\nopen('pid', 'w').write(str(os.getpid()))\n"
        "subprocess.Popen(['sleep', '40'])\nos.system('sleep 41 &')\n"
        "if os.fork() == 0:\n    import time; time.sleep(40); os._exit(0)\n"  # holds TF's log pipes too
        "print('bye')\n"))
    out, err = tmp_path / "out", tmp_path / "err"
    with out.open("wb") as stdout, err.open("wb") as stderr:  # files: pipes would be held open for 40 s
        proc = run([*TRACE, "prog.py"], tmp_path, timeout=30, stdout=stdout, stderr=stderr)
    try:
        assert proc.returncode == 0 and out.read_bytes().startswith(b"bye\n"), err.read_bytes()
        assert b"a process it started is still running (placement does not wait for it)" in err.read_bytes()
    finally:
        os.killpg(int((tmp_path / "pid").read_text()), signal.SIGKILL)
    assert_clean(tmp_path)


def test_ctrl_c_at_a_terminal_reaches_only_the_script(tmp_path: Path) -> None:
    """Ctrl-C at the terminal: the script's process group has the foreground, so the script
    gets exactly the SIGINT it would get without placement, and its cleanup completes."""
    write(tmp_path, PATIENT)
    term = Terminal([*TRACE, "prog.py", "99"], tmp_path)
    assert term.read_until(b"READY"), term.output  # printed once the script has the terminal
    term.type(b"\x03")
    assert term.read_until(b"checkpoint saved"), term.output
    assert term.wait() == 0
    assert b"exited with code 0" in term.output
    assert wait_gone(int((tmp_path / "pid").read_text()))
    assert_clean(tmp_path)


def test_uncaught_ctrl_c_at_a_terminal_exits_130(tmp_path: Path) -> None:
    """Ctrl-C once the script has the terminal (before, it reaches placement, which is not this test);
    the terminal is read all along, so nothing can block on it."""
    write(tmp_path, FOREGROUND + "print('READY', flush=True)\ntime.sleep(600)\n")
    term = Terminal([*TRACE, "prog.py"], tmp_path)
    assert term.read_until(b"READY"), term.output
    term.type(b"\x03")
    assert term.wait() == 130
    assert b"KeyboardInterrupt" in term.output and b"exited with code 130" in term.output


def test_a_terminal_sees_prompts_and_progress_as_they_come(tmp_path: Path) -> None:
    """On a terminal the script has the terminal itself: isatty, prompts without a newline and
    \\r progress bars appear at once (the test answers only once it saw them)."""
    write(tmp_path, (
        "import os, sys\n"
        "print('tty', [os.isatty(fd) for fd in range(3)], os.get_terminal_size(1) == os.get_terminal_size(0))\n"
        "sys.stdout.write('\\rprogress 50%'); sys.stdout.flush()\n"
        "input()\n"
        "print('\\rprogress 100%')\n"
        "name = input('Name: ')\n"
        "print('hello', name, file=sys.stderr)\n"))
    term = Terminal([*TRACE, "prog.py"], tmp_path)
    assert term.read_until(b"\rprogress 50%"), term.output
    term.type(b"\n")
    assert term.read_until(b"Name: "), term.output
    term.type(b"bob\n")
    assert term.wait() == 0
    assert b"tty [True, True, True] True" in term.output and b"hello bob" in term.output


def test_ctrl_z_stops_the_job_and_fg_continues_it(tmp_path: Path) -> None:
    """Ctrl-Z stops the script; placement stops too (as the shell's job would), and continuing
    placement continues the script, with the terminal."""
    write(tmp_path, FOREGROUND + "open('pid', 'w').write(str(os.getpid()))\nprint('READY', flush=True)\n"
                              "name = input()\nprint('hello', name)\n")
    term = Terminal([*TRACE, "prog.py"], tmp_path)
    assert term.read_until(b"READY"), term.output  # the script has the terminal
    script = int((tmp_path / "pid").read_text())
    poll_until(lambda: _reading_stdin(script), "reading the terminal")
    term.type(b"\x1a")
    deadline = time.monotonic() + patience(20)
    status = 0
    while time.monotonic() < deadline:  # a bounded wait for placement to stop
        pid, status = os.waitpid(term.pid, os.WNOHANG | os.WUNTRACED)
        if pid:
            break
        time.sleep(0.05)
    assert os.WIFSTOPPED(status), "placement did not stop with its script"
    os.killpg(term.pid, signal.SIGCONT)  # what `fg` does
    poll_until(lambda: _reading_stdin(script), "reading the terminal again")  # in the background it would stop
    term.type(b"bob\n")
    assert term.wait() == 0 and b"hello bob" in term.output


def test_no_terminal_no_foreground_games(tmp_path: Path) -> None:
    """Without a terminal (here: none at all) the script runs in its own group, signals forwarded."""
    write(tmp_path, "import os\nprint(os.getpgrp() == os.getpid(), os.getsid(0) == os.getsid(os.getppid()))\n")
    proc = run([*TRACE, "prog.py"], tmp_path, stdin=subprocess.DEVNULL, start_new_session=True)
    assert proc.returncode == 0 and proc.stdout.startswith(b"True True\n")


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))




def test_ctrl_c_in_any_command_exits_130(tmp_path: Path) -> None:
    """guarded(): an interrupted command exits 130 (SPEC), with one line and no traceback."""
    proc = subprocess.Popen([*TRACE[:-1], "parse", "-"], cwd=tmp_path, env=environment(tmp_path),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None
    proc.stdin.write(b"a line of a log\n")
    proc.stdin.flush()
    poll_until(lambda: _reading_stdin(proc.pid), "reading its standard input")  # which never ends
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=patience(30))
    assert proc.returncode == 130 and err == b"placement: interrupted\n"
