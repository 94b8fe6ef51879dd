"""`placement trace SCRIPT ARGS` is `python SCRIPT ARGS` to the script: its arguments, its
__main__, its tracebacks, its exit status. None of these scripts imports TensorFlow (and the child
must not either), so they run fast."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import stat
import struct
import subprocess
import sys
import termios
import threading
from pathlib import Path

import pytest

from conftest import is_matmul
from trace_helpers import (TRACE, Terminal, assert_clean, environment, plain_and_traced, program_stdout, run,
                           write)
from processes import checkout_first, patience

IDENTITY = r'''
import json, os, signal, sys
info = {
    "argv": sys.argv, "file": __file__, "path0": sys.path[0], "spec": repr(__spec__), "name": __name__,
    "package": __package__, "cached": __cached__, "doc": __doc__, "loader": type(__loader__).__name__,
    "loader_name": __loader__.name, "loader_path": __loader__.path, "globals": sorted(globals()),
    "main": sys.modules["__main__"].__dict__ is globals(), "flags": repr(sys.flags),
    "environ": sorted(os.environ), "tf_level": os.environ.get("TF_CPP_MIN_LOG_LEVEL"),
    "signals": {s.name: str(signal.getsignal(s)) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP,
                                                           signal.SIGPIPE, signal.SIGTSTP, signal.SIGQUIT)},
    "isatty": [os.isatty(i) for i in range(3)], "buffering": [sys.stdout.line_buffering, sys.stderr.line_buffering],
    "tensorflow": "tensorflow" in sys.modules, "first_fd": os.open(os.devnull, os.O_RDONLY),
}
print(json.dumps(info, sort_keys=True))
'''


def test_everything_after_the_script_is_the_scripts_own(tmp_path: Path) -> None:
    script = write(tmp_path, "import json, sys\nprint(json.dumps(sys.argv))\nsys.exit(5)\n", "args.py")
    args = ["--json", "-h", "--top", "3", "--log", "--device", "GPU", "--save-log", "x", "--", "--", "-"]
    proc = run([*TRACE, "args.py", *args], tmp_path)
    assert proc.returncode == 5, proc.stderr
    assert json.loads(proc.stdout.splitlines()[0]) == [str(Path(script).name), *args]
    assert b"exited with code 5" in proc.stdout  # the report is there: --json was the script's, not trace's


def test_options_of_trace_go_before_the_script(tmp_path: Path) -> None:
    write(tmp_path, "import sys\nprint('ran', sys.argv[1:])\n", "x.py")
    unknown = run([*TRACE, "--soft", "x.py"], tmp_path)
    assert unknown.returncode == 2
    assert b"No such option: --soft" in unknown.stderr and b"no such script" not in unknown.stderr
    assert b"ran" not in unknown.stdout
    own = run([*TRACE, "--json", "x.py", "--json"], tmp_path)
    assert own.returncode == 0 and b"ran ['--json']" in own.stderr  # --json mode: the program's stdout on stderr
    assert json.loads(own.stdout)["exit_code"] == 0
    assert run([*TRACE, "--", "x.py", "-h"], tmp_path).stdout.startswith(b"ran ['-h']")


def test_help_of_trace_and_help_of_the_script(tmp_path: Path) -> None:
    write(tmp_path, "import sys\nprint('script got', sys.argv[1:])\n", "x.py")
    help_ = run([*TRACE, "-h"], tmp_path)
    assert help_.returncode == 0 and b"Usage:" in help_.stdout and b"--force" in help_.stdout
    script = run([*TRACE, "x.py", "-h"], tmp_path)
    assert script.returncode == 0 and script.stdout.startswith(b"script got ['-h']")


def test_the_script_cannot_tell_it_is_traced(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    write(tmp_path / "real", IDENTITY, "who.py")
    (tmp_path / "link.py").symlink_to(tmp_path / "real" / "who.py")
    for script in ("real/who.py", "link.py", "./real/../real/who.py"):
        plain, traced = plain_and_traced(tmp_path, script, "a b", "-h")
        assert traced.returncode == plain.returncode == 0, traced.stderr
        assert json.loads(program_stdout(traced.stdout)) == json.loads(plain.stdout)
    assert json.loads(plain.stdout)["tensorflow"] is False
    assert_clean(tmp_path)


def test_pythonpath_sys_path_and_the_users_own_sitecustomize(tmp_path: Path) -> None:
    (tmp_path / "site").mkdir()
    write(tmp_path / "site", "import sys\nsys.user_site_ran = True\n", "sitecustomize.py")
    write(tmp_path, (
        "import json, os, sys\n"
        "print(json.dumps([os.environ.get('PYTHONPATH'), sys.path, getattr(sys, 'user_site_ran', False),\n"
        "                  getattr(sys.modules.get('sitecustomize'), '__file__', None)]))\n"), "paths.py")
    # placement must be importable itself; the suite's own PYTHONPATH stays (where it is how TensorFlow is found)
    for pythonpath in (checkout_first("site"), checkout_first()):
        env = {**environment(tmp_path), "PYTHONPATH": pythonpath}
        plain, traced = plain_and_traced(tmp_path, "paths.py", env=env)
        assert json.loads(program_stdout(traced.stdout)) == json.loads(plain.stdout), pythonpath
    # without the user's folder its sitecustomize did not run; the module the program sees as sitecustomize
    # (none, or the system's own: Debian's Python has one) is the one it sees without placement, checked above
    assert json.loads(plain.stdout)[2] is False


def test_the_scripts_own_tf_cpp_min_log_level_is_left_to_it(tmp_path: Path) -> None:
    write(tmp_path, IDENTITY, "who.py")
    for env in ({"TF_CPP_MIN_LOG_LEVEL": "3"}, {}):
        plain, traced = plain_and_traced(tmp_path, "who.py", env={**os.environ, **env})
        assert json.loads(program_stdout(traced.stdout))["tf_level"] == json.loads(plain.stdout)["tf_level"]


@pytest.mark.parametrize("body", [
    "def f():\n    raise ValueError('deep')\ndef g():\n    f()\ng()\n",
    "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    raise KeyError('chained') from e\n",
    "def (\n",
    "import sys\nsys.exit('a message')\n",
    "import sys\nsys.excepthook = lambda *a: print('own hook', a[0].__name__)\nraise RuntimeError\n",
    "import atexit\natexit.register(print, 'atexit ran')\nraise KeyboardInterrupt\n",
])
def test_errors_and_exits_as_python_shows_them(tmp_path: Path, body: str) -> None:
    """Same text on stderr, no frame of placement's, same exit status (an uncaught
    KeyboardInterrupt ends the process by SIGINT: 130)."""
    write(tmp_path, body, "bad.py")
    plain, traced = plain_and_traced(tmp_path, "bad.py")
    assert traced.returncode == (130 if plain.returncode == -signal.SIGINT else plain.returncode)
    assert program_stdout(traced.stdout) == plain.stdout
    assert traced.stderr.replace(b"placement: no placements found in the output of bad.py\n", b"") == plain.stderr
    assert b"runpy" not in traced.stderr and b"placement_cli" not in traced.stderr


def test_output_passes_through_byte_for_byte(tmp_path: Path) -> None:
    """Binary bytes, NULs, invalid UTF-8, a last line without newline, lines that look like
    TensorFlow's: the program's output is data, passed on untouched, never parsed."""
    body = (
        "import sys\n"
        "sys.stdout.buffer.write(bytes(range(256)) * 3 + b'\\0\\0\\xff\\xfe\\n')\n"
        "print('a.device: /job:localhost/replica:0/task:0/device:CPU:0')\n"
        "print('x: (MatMul): /job:localhost/replica:0/task:0/device:CPU:0')\n"
        "print('Device mapping: this is my text')\n"
        "print('/job:localhost/replica:0/task:0/device:GPU:0 -> device: 0, name: fake')\n"
        "print('I0000 00:00:1795270798.642321    6213 placer.cc:162] y: (Add): "
        "/job:localhost/replica:0/task:0/device:CPU:0', file=sys.stderr)\n"
        "print('I0101 00:00:00.000000 1 execute.cc:1] Executing op Add in device "
        "/job:localhost/replica:0/task:0/device:CPU:0', file=sys.stderr)\n"
        "sys.stderr.buffer.write(b'err\\0bytes\\x80\\n')\n"
        "sys.stdout.write('no newline at the end')\n"
        "sys.exit(4)\n")
    write(tmp_path, body, "noisy.py")
    plain, traced = plain_and_traced(tmp_path, "noisy.py")
    assert traced.returncode == plain.returncode == 4
    assert traced.stdout.startswith(plain.stdout) and b"exited with code 4" in traced.stdout
    assert traced.stderr == plain.stderr + b"placement: no placements found in the output of noisy.py\n"
    merged = run([sys.executable, "noisy.py"], tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    as_json = run([*TRACE, "--json", "noisy.py"], tmp_path)  # the program's stdout joins its stderr
    data = json.loads(as_json.stdout)
    assert as_json.returncode == 4 and data["exit_code"] == 4
    assert data["placements"] == [] and data["device_mapping"] == [] and data["summary"]["placements"] == 0
    assert as_json.stderr.startswith(merged.stdout)


def test_c_level_output_that_is_not_tensorflows_passes_through(tmp_path: Path) -> None:
    """C stdio output (where TF writes) reaches the terminal unless it is TF's placement log."""
    body = ("import ctypes\nlibc = ctypes.CDLL(None)\n"
            "libc.printf(b'from C: %d\\n', 42)\n"
            "libc.printf(b'x: (MatMul): /job:localhost/replica:0/task:0/device:CPU:0\\n')\n"
            "libc.fflush(None)\n")
    write(tmp_path, body, "c.py")
    proc = run([*TRACE, "--json", "c.py"], tmp_path)
    assert proc.returncode == 0
    assert b"from C: 42\n" in proc.stderr  # --json: the program's stdout goes to stderr
    assert b"x: (MatMul)" not in proc.stderr  # TF's printf shape: TF's, consumed


def test_save_log_is_checked_before_the_script_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    write(tmp_path, f"open({str(marker)!r}, 'w').close()\n", "prog.py")
    (tmp_path / "exists.log").write_text("keep me")
    cases = {
        "missing/x.log": "no such directory",
        ".": "is a directory",
        "exists.log": "the file exists (add --force to overwrite it)",
        "prog.py": "that is the script itself",
    }
    for path, message in cases.items():
        proc = run([*TRACE, "--save-log", path, "prog.py"], tmp_path)
        assert proc.returncode == 2 and message.encode() in proc.stderr, (path, proc.stderr)
        assert b"Traceback" not in proc.stderr
    forced = run([*TRACE, "--force", "--save-log", "prog.py", "prog.py"], tmp_path)
    assert forced.returncode == 2 and b"that is the script itself" in forced.stderr
    assert not marker.exists()
    assert (tmp_path / "exists.log").read_text() == "keep me"
    assert (tmp_path / "prog.py").read_text().startswith("open(")
    write(tmp_path, "import ctypes\nctypes.CDLL(None).printf(b'C says hi\\n')\n", "c.py")
    ok = run([*TRACE, "--force", "--save-log", "exists.log", "c.py"], tmp_path)
    assert ok.returncode == 0 and (tmp_path / "exists.log").read_bytes() == b"C says hi\n"


def test_save_log_writes_into_a_special_file_without_force(tmp_path: Path) -> None:
    """/dev/null or a FIFO is written into, as the pictures are: never replaced, no --force needed."""
    write(tmp_path, "import ctypes\nctypes.CDLL(None).printf(b'C says hi\\n')\n", "c.py")
    null = run([*TRACE, "--save-log", os.devnull, "c.py"], tmp_path)
    assert null.returncode == 0, null.stderr
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    proc = run([*TRACE, "--save-log", str(fifo), "c.py"], tmp_path)
    reader.join(timeout=patience(60))
    assert proc.returncode == 0, proc.stderr
    assert got == [b"C says hi\n"] and stat.S_ISFIFO(fifo.lstat().st_mode)


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_save_log_in_an_unwritable_directory_is_refused(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    write(tmp_path, "print('ran')\n")
    proc = run([*TRACE, "--save-log", "locked/x.log", "prog.py"], tmp_path)
    assert proc.returncode == 2 and b"cannot write it" in proc.stderr and b"ran" not in proc.stdout


def test_missing_script(tmp_path: Path) -> None:
    proc = run([*TRACE, "nope.py"], tmp_path)
    assert proc.returncode == 2 and proc.stderr == b"placement: nope.py: no such script\n"


def test_closed_stdio_is_what_python_would_show(tmp_path: Path) -> None:
    record = tmp_path / "record.txt"
    write(tmp_path, (
        "import os, sys\n"
        "fds = [n for n in range(3) if os.path.exists(f'/proc/self/fd/{n}')]\n"
        f"open({str(record)!r}, 'a').write(repr((sys.stdin, sys.stdout, sys.stderr, fds)) + '\\n')\n"
        "print('ok')\n"), "closed.py")
    for redirect in (">&-", "2>&-", "<&-", ">&- 2>&- <&-"):
        record.unlink(missing_ok=True)
        plain = run(["sh", "-c", f'exec "$@" {redirect}', "sh", sys.executable, "closed.py"], tmp_path)
        expected = record.read_text()
        record.unlink()
        traced = run(["sh", "-c", f'exec "$@" {redirect}', "sh", *TRACE, "closed.py"], tmp_path)
        assert traced.returncode == plain.returncode == 0, (redirect, traced.stderr)
        assert b"Traceback" not in traced.stderr and b"internal error" not in traced.stderr
        assert record.read_text() == expected, redirect
        if redirect == "<&-":
            assert traced.stdout.startswith(b"ok\n") and b"exited with code 0" in traced.stdout
    assert_clean(tmp_path)


def test_neither_placement_nor_the_child_imports_tensorflow_for_the_script(tmp_path: Path) -> None:
    write(tmp_path, "import sys\nprint(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras')))\n")
    probe = ("import runpy, sys\nsys.argv = ['placement', 'trace', 'prog.py']\n"
             "try:\n    runpy.run_module('placement_cli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
             "sys.stderr.write('TF_LOADED=%s' % ('tensorflow' in sys.modules))\n")
    proc = run([sys.executable, "-c", probe], tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith(b"[]\n")
    assert proc.stderr.endswith(b"TF_LOADED=False")


def test_exit_code_of_a_script_killed_by_a_signal(tmp_path: Path) -> None:
    write(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n")
    proc = run([*TRACE, "--json", "prog.py"], tmp_path)
    assert proc.returncode == 128 + signal.SIGTERM and json.loads(proc.stdout)["exit_code"] == 128 + signal.SIGTERM


def test_no_placement_frames_even_from_the_entry_point(tmp_path: Path) -> None:
    write(tmp_path, "import traceback\ntraceback.print_stack()\n")
    proc = run([*TRACE, "prog.py"], tmp_path)
    frames = [line for line in proc.stderr.splitlines() if line.strip().startswith(b"File ")]
    assert frames and all(b"prog.py" in frame for frame in frames), proc.stderr


def test_a_newline_in_the_script_s_name_is_shown_one_way_everywhere(tmp_path: Path) -> None:
    """As docs/output.md says of every name: a control character (a newline too) becomes U+FFFD, in the
    rule, the title and the messages on stderr alike."""
    write(tmp_path, "print('hi')\n", "a\nb.py")
    proc = run([*TRACE, "a\nb.py"], tmp_path)
    out, err = proc.stdout.decode(), proc.stderr.decode()
    assert proc.returncode == 0 and out.startswith("hi\n"), err
    assert "placement: a\ufffdb.py exited with code 0" in out and "trace of a\ufffdb.py (exit code 0)" in out
    assert "no placements found in the output of a\ufffdb.py" in err
    for other in ("a\nb.py", "a\\nb.py", "a b.py"):
        assert other not in out and other not in err
    missing = run([*TRACE, "no\nsuch.py"], tmp_path)
    assert missing.returncode == 2 and "no\ufffdsuch.py: no such script" in missing.stderr.decode()
    assert_clean(tmp_path)


def screen(output: bytes, columns: int) -> list[str]:
    """The lines a terminal of ``columns`` columns shows for ``output`` (text, CR, LF and auto-margin
    wrapping with xterm's pending wrap: enough for placement's plain output)."""
    lines, row, col, pending = [[]], 0, 0, False
    for char in output.decode("utf-8", "replace"):
        if char == "\r":
            col, pending = 0, False
        elif char == "\n":
            row, col, pending = row + 1, 0, False  # the pty turns LF into CR LF
        elif char.isprintable():
            if pending:
                row, col, pending = row + 1, 0, False
            while len(lines) <= row:
                lines.append([])
            line = lines[row]
            line.extend(" " * (col + 1 - len(line)))
            line[col] = char
            if col == columns - 1:
                pending = True
            else:
                col += 1
        while len(lines) <= row:
            lines.append([])
    return ["".join(line).rstrip() for line in lines]


def test_placement_s_output_starts_on_a_line_of_its_own_after_an_unfinished_one(tmp_path: Path) -> None:
    """On a terminal and in a file; a pipe's last byte cannot be known."""
    write(tmp_path, "import sys\nprint('partial line', end='', flush=True)\n")
    terminal = Terminal([*TRACE, "prog.py"], tmp_path)
    fcntl.ioctl(terminal.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    assert terminal.wait() == 0
    shown = screen(terminal.output, 80)
    assert shown[0] == "partial line", shown
    assert shown[1].startswith("─") and "placement: prog.py exited with code 0" in shown[1], shown
    with (tmp_path / "out").open("wb") as out:
        run([*TRACE, "prog.py"], tmp_path, stdout=out, stderr=subprocess.DEVNULL)
    assert (tmp_path / "out").read_bytes().startswith("partial line\n──".encode())
    write(tmp_path, "print('whole line')\n")  # a finished line gets no blank line after it
    terminal = Terminal([*TRACE, "prog.py"], tmp_path)
    fcntl.ioctl(terminal.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    assert terminal.wait() == 0
    shown = screen(terminal.output, 80)
    assert shown[0] == "whole line" and shown[1].startswith("─"), shown
    assert_clean(tmp_path)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


def test_capture_in_a_traced_program_says_trace_has_its_log(tmp_path: Path) -> None:
    """Under trace, TensorFlow's log goes to trace's pipes, never to fd 1/2 where capture() looks: the
    block's report says so (complete False), not that TensorFlow hid its INFO lines."""
    write(tmp_path, "import warnings\nwarnings.simplefilter('ignore')\nfrom placement_cli import capture\n"
                    "import tensorflow as tf\nwith capture() as r:\n    tf.matmul(tf.ones([2, 2]), tf.ones([2, 2]))\n"
                    "print('complete', r.complete, r.problems)\n")
    proc = run([*TRACE, "--json", "prog.py"], tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert b"complete False" in proc.stderr and b"runs under `placement trace`" in proc.stderr
    assert b"hid its INFO lines" not in proc.stderr
    assert any(is_matmul(p["op"]) for p in json.loads(proc.stdout)["placements"])  # the trace's report has them
