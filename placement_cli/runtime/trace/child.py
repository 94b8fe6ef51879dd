"""The child of `placement trace`: the user's script, run by plain `python SCRIPT ARGS`, with
placement logging on from its first TensorFlow op.

python itself runs the script, so its ``sys.argv``, ``__main__``, ``__file__``, ``sys.path[0]``,
tracebacks, stack and exit status are exactly those of `python SCRIPT ARGS`. ``start`` runs before
the script's first line, from ``boot/sitecustomize.py`` (that folder is first on the child's
PYTHONPATH, and $PLACEMENT_TRACE says what to do; both are taken back at once, so the script sees
the environment and sys.path it would see without placement). It

- sends C stdio's ``stdout`` and ``stderr``, where TensorFlow's C++ writes its log, to two pipes
  of the parent; the script's own Python output goes straight to the real stdout and stderr;
- makes the child die with placement (PR_SET_PDEATHSIG), so that it never runs on unsupervised;
- imports TensorFlow only if the script does: an import hook turns placement logging on (and
  patches Sessions) right after ``import tensorflow``, before any op can run, and tells the parent
  the script's TF_CPP_MIN_LOG_LEVEL (TF then logs everything; the parent hides what that level
  would hide);
- at exit, after the script's own atexit handlers, sends the parent the uncaught exception as
  python printed it (placement errors are read from it) and the facts the recorder kept.

$PLACEMENT_TRACE is ``CONTROL,OUT,ERR:PARENT_PID:FLAGS``: the control pipe and the two log pipes;
FLAGS: ``c`` record Session copies, ``p`` the user had a PYTHONPATH, ``1`` close fd 1 (--json
sent the script's stdout to placement's stderr, which was closed when placement started), ``tN``
time it (--time: TensorFlow's profiler on from its import, the step's first W calls left out, at
most S steps measured: ``tW.S``), its files in $PLACEMENT_TRACE_PROFILE (the parent's folder, removed
by the parent whatever becomes of the script).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

ENV = "PLACEMENT_TRACE"
PROFILE_ENV = "PLACEMENT_TRACE_PROFILE"  # --time: the folder the profiler writes in
# Not empty in a program that `placement trace` runs with C stdio pointed at its pipes: TensorFlow's
# log never reaches fd 1 or 2 there (capture() in such a program says so).
TRACED: list[bool] = []
BOOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "boot")


class _TensorFlowHook:
    """A meta path finder that only wraps the loader of the top-level ``tensorflow`` package."""

    def __init__(self, control: int, log: int, copies: bool, timed: tuple[int, int] | None = None) -> None:
        self.control = control
        self.log = log  # the pipe C stdio's stderr (TensorFlow's log) goes to
        self.copies = copies
        self.timed = timed  # --time: the profiler runs; the step's calls it leaves out, the most steps it measures
        self.timing: Any = None
        self.recorder: Any = None
        self.saved_level: str | None = None
        self.boot: ModuleType | None = None  # our sitecustomize, left in sys.modules for site's import

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if self.boot is not None:  # site's import of it is over: it goes, as if it never was
            if sys.modules.get("sitecustomize") is self.boot:
                del sys.modules["sitecustomize"]
            self.boot = None
        if name != "tensorflow":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        import importlib.util  # noqa: PLC0415 - the script's process

        spec = importlib.util.find_spec(name)
        if spec is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _Loader(spec.loader, self)  # type: ignore[assignment]  # a wrapper, not an importlib Loader
        return spec

    def before(self) -> None:
        """TF reads TF_CPP_MIN_LOG_LEVEL once, as it is imported: it logs everything here."""
        self.saved_level = os.environ.get("TF_CPP_MIN_LOG_LEVEL")
        send(self.control, b"L" + (self.saved_level or "").encode("utf-8", "replace") + b"\n")
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"

    def restore(self) -> None:
        if self.saved_level is None:
            os.environ.pop("TF_CPP_MIN_LOG_LEVEL", None)
        else:
            os.environ["TF_CPP_MIN_LOG_LEVEL"] = self.saved_level

    def after(self, tf: Any) -> None:
        _hide_our_frames()
        _say_when_serving(tf, self.control)
        try:
            from placement_cli.runtime.trace.recording import Recorder  # noqa: PLC0415 - the script's process

            recorder = Recorder(tf, copies=self.copies)
            recorder.install()
            self.recorder = recorder
        except Exception:  # noqa: BLE001 - the script runs on, untraced, rather than broken by us
            self.recorder = None
        if self.timed is not None and self.recorder is not None:
            try:
                from placement_cli.runtime.trace.timed import Timing  # noqa: PLC0415 - the script's process

                self.timing = Timing(tf, *self.timed, lambda: list(self.recorder.graphs.graphs.values()),
                                     logdir=os.environ.pop(PROFILE_ENV, None))
                self.timing.start(self.recorder)
            except Exception:  # noqa: BLE001 - the script runs on, untimed
                self.timing = None


class _Loader:
    """``tensorflow``'s own loader, with logging switched on around it."""

    def __init__(self, inner: Any, hook: _TensorFlowHook) -> None:
        self.inner = inner
        self.hook = hook

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def create_module(self, spec: Any) -> Any:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.hook.before()
        try:
            self.inner.exec_module(module)
        finally:
            self.hook.restore()
            module.__loader__ = self.inner
            if module.__spec__ is not None:
                module.__spec__.loader = self.inner
        self.hook.after(module)


_RUNTIME = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # placement_cli/runtime/


def _say_when_serving(tf: Any, control: int) -> None:
    """``tf.distribute.Server.join`` (TF1's ``tf.train.Server`` is the same class) tells the parent,
    before it blocks, that this task now only serves: `trace --cluster` may end such a task once the
    tasks that must finish have, and no other (a worker still training is never cut off)."""
    server: Any = getattr(getattr(tf, "distribute", None), "Server", None)
    join = getattr(server, "join", None)
    if join is None:
        return

    def serving_join(self: Any, *args: Any, **kwargs: Any) -> Any:
        send(control, b"J\n")
        return join(self, *args, **kwargs)

    serving_join.__doc__, serving_join.__name__, serving_join.__qualname__ = join.__doc__, join.__name__, join.__qualname__
    server.join = serving_join


def _hide_our_frames() -> None:
    """The patches of TensorFlow (Session.run, Session(), tf.function tracing) call the program's
    code and TensorFlow's in frames of placement's: an uncaught exception's traceback is shown
    without them, as plain python shows it. sys.excepthook, once TensorFlow is imported: the one
    in place then (the script's own, if it set one) shows it."""
    shown = sys.excepthook

    def excepthook(kind: type[BaseException], error: BaseException, tb: Any) -> Any:
        try:
            _scrub(error)
            tb = error.__traceback__
        except Exception:  # noqa: BLE001 - the exception as it is, rather than none
            pass
        return shown(kind, error, tb)

    sys.excepthook = excepthook


def _scrub(error: BaseException | None) -> None:
    """Take placement's frames out of the tracebacks of an exception and of those it chains."""
    seen: set[int] = set()
    todo = [error]
    while todo:
        error = todo.pop()
        if error is None or id(error) in seen:
            continue
        seen.add(id(error))
        tb = error.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename.startswith(_RUNTIME):
            tb = tb.tb_next
        error.__traceback__ = tb
        while tb is not None and tb.tb_next is not None:
            if tb.tb_next.tb_frame.f_code.co_filename.startswith(_RUNTIME):
                tb.tb_next = tb.tb_next.tb_next
            else:
                tb = tb.tb_next
        todo += [error.__cause__, error.__context__]
        if isinstance(error, BaseExceptionGroup):
            todo += list(error.exceptions)


NO_CAPTURE = ("TensorFlow's log cannot be captured on this platform (C stdio's streams cannot be redirected): "
              "no placements recorded")


def frames(buf: bytearray) -> Iterator[tuple[bytes, bytes]]:
    """The parent's reading of what ``send`` wrote on the control pipe: each whole frame in ``buf``,
    taken off it, as (kind, payload). ``L``: the script's TF_CPP_MIN_LOG_LEVEL as TensorFlow starts;
    ``F``: the facts, at the end; ``E``: an uncaught exception as python printed it (both sized);
    ``X``: TensorFlow's log cannot be captured here (NO_CAPTURE); ``J``: the script called
    ``Server.join``, it serves from now on. An unknown kind drops the rest."""
    while buf:
        newline = buf.find(b"\n")
        if newline < 0:
            return
        kind = bytes(buf[:1])
        if kind in (b"F", b"E"):
            size = int(buf[1:newline])
            if len(buf) < newline + 1 + size:
                return
            payload = bytes(buf[newline + 1 : newline + 1 + size])
            del buf[: newline + 1 + size]
        elif kind in (b"L", b"X", b"J"):
            payload = bytes(buf[1:newline])
            del buf[: newline + 1]
        else:
            buf.clear()
            return
        yield kind, payload


def send(fd: int, data: bytes) -> None:
    """Write all of ``data`` to the parent; a parent that is gone is not the script's problem."""
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view):]
    except OSError:
        pass


def _at_exit(hook: _TensorFlowHook) -> None:
    """Registered before the script's own handlers, so it runs after them."""
    error = getattr(sys, "last_value", None)  # what python printed as the script's uncaught exception
    if isinstance(error, BaseException) and not isinstance(error, (SystemExit, KeyboardInterrupt)):
        try:
            import traceback  # noqa: PLC0415 - the script's process

            text = "".join(traceback.format_exception(type(error), error, error.__traceback__)).encode("utf-8", "replace")
            send(hook.control, b"E%d\n" % len(text) + text)
        except Exception:  # noqa: BLE001
            pass
    if hook.recorder is None:
        return
    import json  # noqa: PLC0415 - the script's process

    saved = os.dup(hook.log)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, hook.log, inheritable=False)  # TF warns for each kernel lookup that fails: not the user's business
    stderr_closed = not _is_open(2)
    if stderr_closed:  # runtime.facts silences fd 2 around kernel lookups: it must exist meanwhile
        os.dup2(null, 2, inheritable=False)
    try:
        if hook.timing is not None:  # first: the profiler stops before the facts are gathered
            hook.timing.finish()
        facts = hook.recorder.facts()
        if hook.timing is not None:
            facts.update(hook.timing.to_dict())
    except Exception as exc:  # noqa: BLE001 - the program's own outcome matters more than our facts
        facts = {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        os.dup2(saved, hook.log, inheritable=False)
        os.close(saved)
        os.close(null)
        if stderr_closed:
            os.close(2)
    data = json.dumps(facts).encode()
    send(hook.control, b"F%d\n" % len(data) + data)


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _out_of_the_way(fd: int) -> int:
    """Our pipes move up to high fd numbers, where the script's own files do not land (its first
    open() gets the fd it would get under plain python); close-on-exec, so that its children do
    not hold them."""
    import fcntl  # noqa: PLC0415 - the script's process

    try:
        high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 512)
    except OSError:
        os.set_inheritable(fd, False)
        return fd
    os.close(fd)
    return high


def _die_with_parent(parent: int) -> None:
    """If placement is killed (even by SIGKILL), the script must not run on unsupervised."""
    import signal  # noqa: PLC0415 - the script's process

    try:
        import ctypes  # noqa: PLC0415 - the script's process

        ctypes.CDLL(None).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG (Linux)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # it died before prctl took effect
        os.kill(os.getpid(), signal.SIGKILL)


def _capture_c_stdio(out: int, err: int) -> bool:
    """Point C stdio's ``stdout`` and ``stderr`` at the parent's pipes: TensorFlow's printf copies
    and its glog lines go there, and nothing of the script's Python output does. Needs a C library
    whose stream pointers can be reassigned (glibc, macOS); False where they cannot."""
    import ctypes  # noqa: PLC0415 - the script's process

    if sys.platform == "darwin":
        names = ("__stdoutp", "__stderrp")
    else:
        try:
            glibc = (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")
        except (ValueError, OSError):
            glibc = False
        if not glibc:  # musl's stdout is a const pointer: never write to it
            return False
        names = ("stdout", "stderr")
    try:
        libc = ctypes.CDLL(None)
        fdopen = libc.fdopen
        fdopen.restype = ctypes.c_void_p
        fdopen.argtypes = (ctypes.c_int, ctypes.c_char_p)
        libc.setvbuf.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_size_t)
        libc.fflush(None)
        streams = [fdopen(fd, b"w") for fd in (out, err)]
        if not all(streams):
            return False
        libc.setvbuf(streams[0], None, 1, 0)  # _IOLBF: each placement line whole, as it is printed
        libc.setvbuf(streams[1], None, 2, 0)  # _IONBF, as C's stderr is
        for name, stream in zip(names, streams):
            ctypes.c_void_p.in_dll(libc, name).value = stream
    except (OSError, ValueError, AttributeError):
        return False
    return True


def _closed_stdout(flags: str) -> None:
    """--json sends the script's stdout to placement's stderr: closed, if that was closed."""
    if "1" in flags:
        try:
            os.close(1)
        except OSError:
            pass
        sys.stdout = sys.__stdout__ = None  # type: ignore[misc]  # typeshed marks sys.__stdout__ Final


def _take_back_the_boot(boot: ModuleType, had_pythonpath: bool) -> None:
    """PYTHONPATH, sys.path and sitecustomize as plain python would have them."""
    value = os.environ.get("PYTHONPATH", "")
    if had_pythonpath:
        os.environ["PYTHONPATH"] = value[len(BOOT) + 1 :] if value.startswith(BOOT + os.pathsep) else ""
    else:
        os.environ.pop("PYTHONPATH", None)
    sys.path[:] = [p for p in sys.path if p != BOOT]
    sys.path_importer_cache.pop(BOOT, None)
    import site  # noqa: PLC0415 - the script's process

    if sys.modules.get("sitecustomize") is boot:
        del sys.modules["sitecustomize"]
    site.execsitecustomize()  # the user's own, if any, as site would have imported it
    sys.modules.setdefault("sitecustomize", boot)  # the import under way expects a module there


def start(boot: ModuleType) -> None:
    control = os.environ.pop(ENV, None)
    if control is None:
        return
    fds, parent, flags = control.split(":", 2)
    fd, out, err = (_out_of_the_way(int(f)) for f in fds.split(","))
    _die_with_parent(int(parent))
    if _capture_c_stdio(out, err):
        TRACED.append(True)
    else:
        send(fd, b"X\n")
    timed = re.search(r"t(\d+)\.(\d+)", flags)  # the counts first: their digits are no flags of their own
    flags = re.sub(r"t\d+\.\d+", "", flags)
    _closed_stdout(flags)
    hook = _TensorFlowHook(fd, err, copies="c" in flags,
                           timed=(int(timed.group(1)), int(timed.group(2))) if timed else None)
    sys.meta_path.insert(0, hook)
    import atexit  # noqa: PLC0415 - the script's process

    atexit.register(_at_exit, hook)
    _take_back_the_boot(boot, "p" in flags)  # last: the user's sitecustomize may import TensorFlow
    if sys.modules.get("sitecustomize") is boot:
        hook.boot = boot  # ... and the script's first import takes it out of sys.modules
