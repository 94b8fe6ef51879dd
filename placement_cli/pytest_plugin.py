"""The pytest plugin (entry point ``pytest11``): a fixture ``placement`` for placement checks in a
user's own tests. Loaded in every pytest run where placement is installed, so it imports no
TensorFlow (nor anything of placement's until a test asks).

TensorFlow logs eager ops and tf.functions only if placement logging was on when its context
started (its first op), and tests run in any order, several to a process (pytest-xdist): a test
that captures may come after others that ran TensorFlow. So when any collected test asks for the
fixture, the plugin switches placement logging on as TensorFlow is imported (or at once, if it
was imported while the tests were collected and has run no op yet), as `placement trace` does:
TensorFlow then logs every op of that pytest process, and each ``capture()`` sees its own."""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

FIXTURE = "placement"
# What a capture() that came too late tells a pytest user (the notebook's advice is a kernel restart).
ADVICE = ("In pytest, the placement plugin switches logging on before TensorFlow's first op when a collected test "
          "asks for the `placement` fixture, but here TensorFlow had run an op before the tests started (at import "
          "or collection: a module-level op, a conftest.py or another plugin). Move that op into a test or a "
          "fixture, or run the test in a pytest of its own")
# What it tells one whose test asked for the fixture with request.getfixturevalue(): no collected test asked
# for it, so logging went on only when that test did, after other tests had run TensorFlow ops.
DYNAMIC_ADVICE = ("In pytest, the placement plugin switches logging on before TensorFlow's first op when a collected "
                  "test asks for the `placement` fixture as an argument; no collected test did (this one asked with "
                  "request.getfixturevalue(\"placement\"), as it ran), and earlier tests had run TensorFlow ops by "
                  "then. Ask for the fixture as the test's argument (def test_x(placement): ...), or mark the test "
                  "@pytest.mark.usefixtures(\"placement\"), so that the plugin sees it at collection")
# the import hook while it waits; whether logging went on; whether a collected test asked for the fixture
# (None: no collection ran, as in pytester's inline runs)
_STATE: dict[str, Any] = {"hook": None, "on": None, "asked": None}


class _AfterImport:
    """A meta path finder for the top-level ``tensorflow`` package only: its loader runs as it is,
    then placement logging goes on, before any code can run an op."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "tensorflow":
            return None
        _unhook()
        import importlib.util  # noqa: PLC0415 - pytest start-up

        spec = importlib.util.find_spec(name)
        loader = getattr(spec, "loader", None)
        if spec is None or not hasattr(loader, "exec_module"):
            return spec
        spec.loader = _Loader(loader)  # type: ignore[assignment]  # a wrapper, not an importlib Loader subclass
        return spec


class _Loader:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def create_module(self, spec: Any) -> Any:
        return self.inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        try:
            self.inner.exec_module(module)
        finally:
            module.__loader__ = self.inner
            if module.__spec__ is not None:
                module.__spec__.loader = self.inner
        _switch_on(module)


def _unhook() -> None:
    hook, _STATE["hook"] = _STATE["hook"], None
    if hook is not None and hook in sys.meta_path:
        sys.meta_path.remove(hook)


def _switch_on(tf: Any) -> None:
    try:
        from placement_cli.notebook import log_from_the_start  # noqa: PLC0415 - pytest start-up

        _STATE["on"] = log_from_the_start(tf)
    except Exception:  # noqa: BLE001 - the tests run on; a capture() then says what it could not see
        _STATE["on"] = False


def log_from_the_start() -> None:
    """Placement logging on from TensorFlow's first op in this process: now, if TensorFlow is
    imported and has run no op, else as soon as it is imported."""
    tf = sys.modules.get("tensorflow")
    if tf is not None:
        if getattr(tf, "debugging", None) is not None:  # imported (not half-way through its own import)
            _switch_on(tf)
        return
    if _STATE["hook"] is None:
        hook = _AfterImport()
        _STATE["hook"] = hook
        sys.meta_path.insert(0, hook)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Before the first test: if any collected test asks for the fixture, logging goes on (each
    pytest-xdist worker collects every test, so each worker does this for itself)."""
    _STATE["asked"] = any(FIXTURE in getattr(item, "fixturenames", ()) for item in session.items)
    if _STATE["asked"]:
        log_from_the_start()


def advice() -> str:
    """What a capture() that came too late tells this pytest run's user: an op before the tests
    started, or, where no collected test asked for the fixture, a fixture asked for too late."""
    return DYNAMIC_ADVICE if _STATE["asked"] is False else ADVICE


def pytest_unconfigure(config: pytest.Config) -> None:
    _unhook()


class PlacementFixture:
    """What the ``placement`` fixture gives a test.

    ``placement.capture()`` is ``placement_cli.capture()``; the report it gives has ``check(...)``.
    ``placement.check(PATH, ...)`` checks a saved log or ``--json`` report with the same rules."""

    def capture(self, enable_logging: bool = True) -> Any:
        """``with placement.capture() as report: ...``, then ``report.check(max_on={"CPU": 0})``."""
        from placement_cli.notebook import Capture  # noqa: PLC0415 - TensorFlow only when a test captures

        if enable_logging and _STATE["on"] is None:  # a test run without collection (pytester inline)
            log_from_the_start()
        return Capture(enable_logging, advice=advice())

    def check(self, path: str | os.PathLike[str], **rules: Any) -> Any:
        """The rules of ``report.check()`` against a log or a report saved with ``--json`` at ``path``:
        AssertionError naming each rule that failed and its nodes; returns the CheckResult. A file that
        is not there raises FileNotFoundError, a folder IsADirectoryError, and one that is no log or
        report (or a rule that is malformed or that it cannot judge) ValueError."""
        __tracebackhide__ = True  # pytest shows the test's line, not the plugin's
        import errno  # noqa: PLC0415 - pytest start-up

        from placement_cli.exceptions import InputError  # noqa: PLC0415 - pytest start-up
        from placement_cli.logparse.saved import read_input  # noqa: PLC0415 - pytest start-up
        from placement_cli.rules import assert_holds  # noqa: PLC0415 - pytest start-up

        name = os.fspath(path)
        if not os.path.exists(name):
            raise FileNotFoundError(errno.ENOENT, "no such file", name)
        if os.path.isdir(name):
            raise IsADirectoryError(errno.EISDIR, "a directory, not a log or a saved report", name)
        try:
            report = read_input(name)
        except InputError as exc:
            raise ValueError(str(exc)) from None
        return assert_holds(report, name=name, **rules)


@pytest.fixture
def placement() -> PlacementFixture:
    """Capture TensorFlow's placements in a test and check them: see PlacementFixture."""
    return PlacementFixture()
