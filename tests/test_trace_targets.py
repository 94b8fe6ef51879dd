"""trace runs what ``python SCRIPT`` runs: a file, a folder with __main__.py, a zip archive holding
__main__.py; the script sees sys.argv and sys.path as python sets them."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import run_cli
from processes import patience

SHOW = ("import json, sys\n"
        "print('SEEN ' + json.dumps({'argv': sys.argv, 'path0': sys.path[0]}), flush=True)\n")
MATMUL = "import tensorflow as tf\nprint(tf.matmul(tf.ones([2, 2]), tf.ones([2, 2])).shape, flush=True)\n"


def _seen(output: str) -> dict[str, object]:
    line = next(line for line in output.splitlines() if line.startswith("SEEN "))
    return json.loads(line[len("SEEN "):])


def _folder(tmp_path: Path, body: str) -> Path:
    app = tmp_path / "app"
    app.mkdir()
    (app / "__main__.py").write_text("import helper\n" + body)
    (app / "helper.py").write_text("")  # found: the folder is sys.path[0], as python makes it
    return app


def _zip(tmp_path: Path, body: str) -> Path:
    archive = tmp_path / "app.pyz"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("__main__.py", "import helper\n" + body)
        zf.writestr("helper.py", "")
    return archive


@pytest.mark.parametrize("make", [_folder, _zip])
def test_a_folder_or_zip_runs_as_python_runs_it(tmp_path: Path, make: object) -> None:
    target = make(tmp_path, SHOW)  # type: ignore[operator]
    for cwd_relative in (False, True):
        name = target.name if cwd_relative else str(target)
        plain = subprocess.run([sys.executable, name, "a b", "-x"], capture_output=True, text=True, cwd=tmp_path,
                               timeout=patience(60))
        traced = subprocess.run([sys.executable, "-m", "placement_cli", "trace", name, "a b", "-x"],
                                capture_output=True, text=True, cwd=tmp_path, timeout=patience(120))
        assert plain.returncode == 0 and traced.returncode == 0, traced.stderr
        assert _seen(traced.stdout) == _seen(plain.stdout)
        assert _seen(traced.stdout)["argv"] == [name, "a b", "-x"]


def test_a_folder_without_main_is_a_usage_error_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "helper.py").write_text("print('never')\n")
    proc = run_cli("trace", str(tmp_path / "lib"))
    assert proc.returncode == 2 and "never" not in proc.stdout
    assert proc.stderr == f"placement: {tmp_path / 'lib'}: a folder with no __main__.py (python runs a folder by its __main__.py)\n"
    assert run_cli("trace", str(tmp_path / "missing")).stderr.endswith(": no such script\n")


def test_a_folders_tensorflow_placements_are_traced(tmp_path: Path) -> None:
    proc = run_cli("trace", "--json", "--op", "MatMul", str(_folder(tmp_path, MATMUL)))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["exit_code"] == 0 and data["placements"], proc.stderr
    assert {p["op"] for p in data["placements"]} <= {"MatMul", "_MklMatMul", "_MklNativeMatMul"}  # oneDNN renames it on some CPUs
