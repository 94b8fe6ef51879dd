"""The package's shape: no import cycle (imports inside functions count), no import against the flow
capture -> parse -> model -> render -> print, no module over 500 lines (tools/layers.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

TOOL = Path(__file__).resolve().parent.parent / "tools" / "layers.py"


def _layers():
    spec = importlib.util.spec_from_file_location("layers", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_package_keeps_its_layers() -> None:
    assert _layers().violations() == []


def test_the_check_sees_a_cycle_an_arrow_against_the_flow_and_a_long_module(tmp_path: Path, monkeypatch) -> None:
    layers = _layers()
    package = tmp_path / "placement_cli"
    (package / "render").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "render" / "__init__.py").write_text("")
    (package / "render" / "a.py").write_text("def f():\n    from placement_cli.render import b\n")
    (package / "render" / "b.py").write_text("from placement_cli.render.a import f\nimport placement_cli.why\n")
    (package / "why.py").write_text("x = 1\n" * 501)
    monkeypatch.setattr(layers, "ROOT", package)
    found = layers.violations()
    assert "cycle: placement_cli.render.a <-> placement_cli.render.b" in found
    assert "placement_cli.render.b imports placement_cli.why: against the flow" in found
    assert "placement_cli.why: 501 lines (at most 500)" in found


# What a module may import only inside the function that needs it: TensorFlow and what comes with it
# (imported when a run starts TensorFlow), and what is no dependency of placement's (IPython: only in a
# notebook that has it; the tensorboard extra).
NOT_AT_IMPORT = ("tensorflow", "numpy", "google", "keras", "tf_keras", "IPython", "ipykernel", "tensorboard")
_IMPORT_EVERY_MODULE = """
import importlib, pkgutil, sys
blocked = set(sys.argv[1].split(","))

class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ImportError(f"{name} imported at the top of a module")
        return None

sys.meta_path.insert(0, Refuse())
import placement_cli
for info in pkgutil.walk_packages(placement_cli.__path__, "placement_cli."):
    if info.name.endswith(("__main__", "pytest_plugin", "sitecustomize")):
        continue  # running: the CLI; pytest's own; the trace child's boot
    importlib.import_module(info.name)
print("imported", len(sys.modules))
"""


def test_every_module_imports_without_tensorflow_or_what_is_no_dependency() -> None:
    """A plain `pip install .` has no IPython: capture() failed at import when pystreams imported it at
    its top; TensorFlow and its own packages load only where a run starts them."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _IMPORT_EVERY_MODULE, ",".join(NOT_AT_IMPORT)], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0 and done.stdout.startswith("imported"), done.stderr[-3000:]
