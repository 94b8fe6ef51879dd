"""The code's own checks, as pyproject.toml configures them: ruff's rules over the whole tree and mypy's
types over the package (strict on the model, its renderers, the parser and the messages). A new
violation fails here, so the README's test command fails on it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from processes import patience

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=patience(300), check=False)


def test_ruff_finds_nothing() -> None:
    done = _run("ruff", "check", "--no-cache", ".")
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


def test_mypy_finds_nothing(tmp_path: Path) -> None:
    done = _run("mypy", "--cache-dir", str(tmp_path / "cache"))
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


def test_the_checks_can_fail(tmp_path: Path) -> None:
    """The configuration is the project's: a rule it selects, and strict types where it asks for them."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    model = tmp_path / "placement_cli" / "model"
    model.mkdir(parents=True)
    (tmp_path / "placement_cli" / "__init__.py").write_text("")
    (model / "__init__.py").write_text("")
    (model / "loose.py").write_text("def untyped(x):\n    return x\n")  # fine by ruff, not by strict mypy
    (tmp_path / "placement_cli" / "blind.py").write_text(
        "def f() -> None:\n    try:\n        pass\n    except Exception:\n        f()\n")  # BLE001
    ruff = _run("ruff", "check", "--no-cache", ".", cwd=tmp_path)
    assert ruff.returncode == 1 and "BLE001" in ruff.stdout and "loose.py" not in ruff.stdout, ruff.stdout
    mypy = _run("mypy", "--cache-dir", str(tmp_path / "cache"), cwd=tmp_path)
    assert mypy.returncode == 1, mypy.stdout
    assert "loose.py:1: error: Function is missing a type annotation" in mypy.stdout, mypy.stdout
    assert "blind.py" not in mypy.stdout  # outside the strict packages: annotated enough
