"""`parse` and `--help` must never import TensorFlow (it takes seconds to start)."""

import subprocess
import sys

from conftest import LOGS
from processes import patience

PROBE = """
import sys, runpy
sys.argv = ["placement", *{args!r}]
try:
    runpy.run_module("placement_cli", run_name="__main__")
except SystemExit:
    pass
sys.stderr.write("\\nTF_LOADED=%s\\n" % ("tensorflow" in sys.modules))
"""


def _tf_loaded(*args: str) -> bool:
    proc = subprocess.run([sys.executable, "-c", PROBE.format(args=list(args))], capture_output=True, text=True,
                          timeout=patience(60))
    assert "TF_LOADED=" in proc.stderr, proc.stderr
    return "TF_LOADED=True" in proc.stderr


def test_parse_does_not_import_tensorflow() -> None:
    assert not _tf_loaded("parse", str(LOGS / "tf2.21" / "guide_matmul_plain.log"))
    assert not _tf_loaded("parse", "--summary", "--json", str(LOGS / "tf1.x" / "errors_mixed.log"))


def test_help_does_not_import_tensorflow() -> None:
    assert not _tf_loaded("--help")
    assert not _tf_loaded("show", "--help")
    assert not _tf_loaded("inspect", "--help")
    assert not _tf_loaded("inspect", "not a target")  # a bad target is refused before TensorFlow starts


def test_probe_can_see_tensorflow_when_it_is_imported() -> None:
    """The check above must be able to fail: a command that runs TensorFlow is seen."""
    assert _tf_loaded("show", "--json")


def test_demo_list_and_parse_in_chinese_do_not_import_tensorflow() -> None:
    assert not _tf_loaded("demo", "--list", "--lang", "zh")
    assert not _tf_loaded("demo", "--help")
    assert not _tf_loaded("parse", "--lang", "zh", str(LOGS / "tf1.x" / "errors_mixed.log"))


def test_diff_does_not_import_tensorflow() -> None:
    saved = LOGS.parent / "saved"
    assert not _tf_loaded("diff", str(LOGS / "tf0.x" / "guide_default.log"), str(saved / "show.json"))
    assert not _tf_loaded("diff", "--json", "--lang", "zh", str(saved / "trace.json"),
                          str(LOGS / "tf2.21" / "guide_matmul_plain.log"))
