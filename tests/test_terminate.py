"""SIGTERM and SIGHUP end a command that runs TensorFlow like Ctrl-C does: one line, exit 128 + the
signal, TensorFlow's temporary files (autograph's generated modules) removed by the normal exit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from processes import patience


@pytest.mark.parametrize(("sig", "code", "line"), [(signal.SIGTERM, 143, "terminated"),
                                                   (signal.SIGHUP, 129, "hung up")])
def test_a_signal_mid_demo_is_one_line_and_its_exit_code(tmp_path: Path, sig: int, code: int, line: str) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path), "COLUMNS": "100"}
    child = subprocess.Popen([sys.executable, "-m", "placement_cli", "demo", "--no-pause"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None
    for shown in child.stdout:  # the demo is under way once its first step is printed
        if "2" in shown and ("/" in shown or "step" in shown.lower()) and shown.strip():
            break
    child.send_signal(sig)
    _out, err = child.communicate(timeout=patience(120))
    lines = [x for x in err.splitlines() if x.startswith("placement:")]
    assert child.returncode == code, err[-2000:]
    assert lines == [f"placement: {line}"], err[-2000:]
    assert "Traceback" not in err
    assert not list(tmp_path.rglob("__autograph_generated_file*")), list(tmp_path.rglob("*"))
