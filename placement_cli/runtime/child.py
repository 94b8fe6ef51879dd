"""The child of `placement trace`: runs SCRIPT as `python SCRIPT` would, placement logging on.

Run as ``python -m placement_cli.runtime.child CONTROL SCRIPT [ARGS...]``, where CONTROL is
``FD:PARENT_PID:FLAGS`` (FD: the pipe to the parent; FLAGS: ``c`` to record Session copies,
``0``/``1``/``2`` for each stdio fd that was closed when placement started). The script gets its
own ``sys.argv``, ``__main__``, ``__file__``, ``sys.path[0]``, tracebacks and exit status, as under
plain python. TensorFlow is imported only if the script imports it: an import hook turns placement
logging on (and patches Sessions) right after ``import tensorflow``, before any op can run. Over
the pipe the parent learns the script's TF_CPP_MIN_LOG_LEVEL when it imports TensorFlow (which
then logs everything: the parent hides what that level would) and, at the end, the facts the
recorder kept (see runtime.recording).
"""

import os
import sys

_exit_by_sigint = False


class _TensorFlowHook:
    """A meta path finder that only wraps the loader of the top-level ``tensorflow`` package."""

    def __init__(self, control: int, copies: bool) -> None:
        self.control = control
        self.copies = copies
        self.recorder = None
        self.saved_level: "str | None" = None

    def find_spec(self, name, path=None, target=None):  # noqa: ANN001, ANN201 - importlib's protocol
        if name != "tensorflow":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        import importlib.util  # noqa: PLC0415

        spec = importlib.util.find_spec(name)
        if spec is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _Loader(spec.loader, self)
        return spec

    def before(self) -> None:
        """TF reads TF_CPP_MIN_LOG_LEVEL once, at import: it logs everything here, and the parent
        hides what the script's level would have hidden."""
        self.saved_level = os.environ.get("TF_CPP_MIN_LOG_LEVEL")
        send(self.control, b"L" + (self.saved_level or "").encode("utf-8", "replace") + b"\n")
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"

    def restore(self) -> None:
        if self.saved_level is None:
            os.environ.pop("TF_CPP_MIN_LOG_LEVEL", None)
        else:
            os.environ["TF_CPP_MIN_LOG_LEVEL"] = self.saved_level

    def after(self, tf: object) -> None:
        try:
            from placement_cli.runtime.recording import Recorder  # noqa: PLC0415

            recorder = Recorder(tf, copies=self.copies)
            recorder.install()
            self.recorder = recorder
        except Exception:  # noqa: BLE001 - the script runs on, untraced, rather than broken by us
            self.recorder = None


class _Loader:
    """``tensorflow``'s own loader, with logging switched on around it."""

    def __init__(self, inner: object, hook: _TensorFlowHook) -> None:
        self.inner = inner
        self.hook = hook

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def create_module(self, spec):  # noqa: ANN001, ANN201
        return self.inner.create_module(spec)

    def exec_module(self, module) -> None:  # noqa: ANN001
        self.hook.before()
        try:
            self.inner.exec_module(module)
        finally:
            self.hook.restore()
            module.__loader__ = self.inner
            if module.__spec__ is not None:
                module.__spec__.loader = self.inner
        self.hook.after(module)


def send(fd: int, data: bytes) -> None:
    """Write all of ``data`` to the parent; a parent that is gone is not the script's problem."""
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view):]
    except OSError:
        pass


def _send_facts(hook: _TensorFlowHook) -> None:
    if hook.recorder is None:
        return
    import json  # noqa: PLC0415

    try:
        facts = hook.recorder.facts()
    except Exception as exc:  # noqa: BLE001 - the program's own outcome matters more than our facts
        facts = {"error": f"{type(exc).__name__}: {exc}"}
    data = json.dumps(facts).encode()
    send(hook.control, b"F%d\n" % len(data) + data)


def _die_with_parent(parent: int) -> None:
    """If placement is killed (even by SIGKILL), the script must not run on unsupervised."""
    import signal  # noqa: PLC0415

    try:
        import ctypes  # noqa: PLC0415

        ctypes.CDLL(None).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG (Linux)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # it died before prctl took effect
        os.kill(os.getpid(), signal.SIGKILL)


def _line_buffer_c_stdout() -> None:
    """TensorFlow's printf copy of each placement must reach the parent whole and beside its glog
    twin, as on a terminal; C stdio would otherwise flush it in 4 KiB blocks cut mid-line."""
    if os.isatty(1):
        return
    try:
        import ctypes  # noqa: PLC0415

        libc = ctypes.CDLL(None)
        stdout = ctypes.c_void_p.in_dll(libc, "stdout")
        libc.setvbuf(stdout, None, 1, ctypes.c_size_t(0))  # _IOLBF
    except (OSError, ValueError, AttributeError):
        pass


def _closed_stdio(flags: str) -> None:
    """What python shows a script whose stdin/stdout/stderr was closed: None. fd 2 stays open
    underneath (it carries TensorFlow's log to the parent, which discards the rest)."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        if str(fd) in flags:
            if fd != 2:
                os.close(fd)
            setattr(sys, name, None)
            setattr(sys, f"__{name}__", None)


def _at_exit() -> None:
    """Registered before the script's own handlers, so it runs after them: an uncaught
    KeyboardInterrupt ends the process by SIGINT, as python does."""
    if not _exit_by_sigint:
        return
    import signal  # noqa: PLC0415

    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)


def _run(script: str, args: list, hook: _TensorFlowHook) -> None:
    global _exit_by_sigint
    import builtins  # noqa: PLC0415
    import types  # noqa: PLC0415
    from importlib.machinery import SourceFileLoader  # noqa: PLC0415

    path = script if os.path.isabs(script) else os.path.join(os.getcwd(), script)  # as python sets __file__
    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError as exc:
        if sys.stderr is not None:
            sys.stderr.write(f"{sys.executable}: can't open file {path!r}: [Errno {exc.errno}] {exc.strerror}\n")
        raise SystemExit(2) from None
    sys.argv = [script, *args]
    sys.path[0] = os.path.dirname(os.path.realpath(script))
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=path, __cached__=None, __loader__=SourceFileLoader("__main__", path),
                         __builtins__=builtins, __spec__=None, __package__=None, __annotations__={})
    sys.modules["__main__"] = main
    try:
        exec(compile(source, path, "exec", dont_inherit=True), main.__dict__)  # noqa: S102 - running it is the point
    except SystemExit:
        _send_facts(hook)
        raise
    except BaseException as exc:  # noqa: BLE001 - printed as python prints an uncaught exception
        tb = exc.__traceback__.tb_next if exc.__traceback__ else None  # the script's frames only
        exc.__traceback__ = tb
        try:
            sys.excepthook(type(exc), exc, tb)
        except Exception:  # noqa: BLE001
            pass
        _send_facts(hook)
        _exit_by_sigint = isinstance(exc, KeyboardInterrupt)
        del exc, tb
        raise SystemExit(1) from None
    _send_facts(hook)


def main() -> None:
    control, script, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    fd_text, parent, flags = control.split(":", 2)
    fd = int(fd_text)
    os.set_inheritable(fd, False)  # the script's own children must not hold the parent's pipe
    _die_with_parent(int(parent))
    import atexit  # noqa: PLC0415

    atexit.register(_at_exit)
    _closed_stdio(flags)
    if "1" not in flags:
        _line_buffer_c_stdout()
    hook = _TensorFlowHook(fd, copies="c" in flags)
    sys.meta_path.insert(0, hook)
    _run(script, args, hook)


if __name__ == "__main__":
    main()
