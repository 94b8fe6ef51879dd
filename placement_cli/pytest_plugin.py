"""The pytest plugin (entry point ``pytest11``): a fixture ``placement`` for placement checks in a
user's own tests. Loaded in every pytest run where placement is installed, so it imports no
TensorFlow (nor anything of placement's until a test asks)."""

from __future__ import annotations

import os
from typing import Any

import pytest


class PlacementFixture:
    """What the ``placement`` fixture gives a test.

    ``placement.capture()`` is ``placement_cli.capture()``; the report it gives has ``check(...)``.
    ``placement.check(PATH, ...)`` checks a saved log or ``--json`` report with the same rules."""

    def capture(self, enable_logging: bool = True) -> Any:
        """``with placement.capture() as report: ...``, then ``report.check(max_on={"CPU": 0})``."""
        from placement_cli.notebook import capture  # noqa: PLC0415 - TensorFlow only when a test captures

        return capture(enable_logging)

    def check(self, path: str | os.PathLike[str], **rules: Any) -> Any:
        """The rules of ``report.check()`` against a log or a report saved with ``--json`` at ``path``:
        AssertionError naming each rule that failed and its nodes; returns the CheckResult. A file that
        is not there raises FileNotFoundError, a folder IsADirectoryError, and one that is no log or
        report (or a rule that is malformed or that it cannot judge) ValueError."""
        __tracebackhide__ = True  # pytest shows the test's line, not the plugin's
        import errno  # noqa: PLC0415

        from placement_cli.exceptions import InputError  # noqa: PLC0415
        from placement_cli.logparse.saved import read_input  # noqa: PLC0415
        from placement_cli.rules import assert_holds  # noqa: PLC0415

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
