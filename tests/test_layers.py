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
