"""The pytest plugin: registered through the pytest11 entry point, a `placement` fixture in a user's
own tests (a temporary project, run by a pytest of its own), and no TensorFlow imported by loading it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from conftest import FIXTURES
from processes import patience

pytest_plugins = ["pytester"]

TRACE = FIXTURES / "check" / "moved_ops_copies.json"  # placement trace --copies --json samples/moved_ops.py


def test_the_plugin_is_registered_through_the_pytest11_entry_point() -> None:
    found = [e for e in entry_points(group="pytest11") if e.name == "placement"]
    assert [e.value for e in found] == ["placement_cli.pytest_plugin"]


def test_importing_the_plugin_imports_no_tensorflow() -> None:
    code = ("import sys, placement_cli.pytest_plugin as p; p.PlacementFixture();"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras', 'rich', 'typer'));"
            "print(bad)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=patience(120))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_a_users_test_run_loads_the_plugin_without_tensorflow(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_gate=f"""
        import sys

        def test_saved_report_passes(placement):
            result = placement.check({str(TRACE)!r}, max_on={{"CPU:1": 3}}, expect={{"^v$": "CPU:0"}})
            assert result.passed and result.placements == 19
            assert not any(m.split(".")[0] == "tensorflow" for m in sys.modules)

        def test_saved_report_fails(placement):
            placement.check({str(TRACE)!r}, max_on="CPU:1=1", no_fallback=True, ignore=["^ones_2$"])
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*AssertionError: placement check failed: 2 of 2 rules",
        "*--max-on CPU:1=1: placements on CPU:1: 2, at most 1 allowed (e.g. x, ones_1)",
        ("*--no-fallback: soft fallbacks (ops placed elsewhere than they asked): 3 "
        "(e.g. pinned, AssignAddVariableOp, ReadVariableOp)"),
    ])
    text = result.stdout.str()
    assert "ones_2" not in text.replace("^ones_2$", "")  # ignored
    assert "assert_holds" not in text and "rules/__init__.py" not in text  # the user's line, not placement's frames


def test_a_rule_the_report_cannot_judge_is_an_error_not_a_pass(pytester: pytest.Pytester) -> None:
    log = FIXTURES / "logs" / "tf2.21" / "guide_matmul_plain.log"
    pytester.makepyfile(test_gate=f"""
        import pytest

        def test_bare_log(placement):
            with pytest.raises(ValueError, match="--no-fallback needs a report that knows"):
                placement.check({str(log)!r}, no_fallback=True)
            with pytest.raises(ValueError, match="looks like an option"):
                placement.check({str(log)!r}, ignore="--json", max_on={{"CPU": 3}})
            placement.check({str(log)!r}, max_on={{"CPU": 3}})
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


@pytest.mark.tf
def test_capture_and_check_in_a_users_test(pytester: pytest.Pytester) -> None:
    """One small real TensorFlow run: a tf.function whose op asks for a GPU no machine has (TF2 places
    softly, so it lands on a device that exists) and one pinned to the CPU."""
    pytester.makepyfile(test_model=textwrap.dedent("""
        import pytest

        def test_placements(placement):
            with placement.capture() as report:
                import tensorflow as tf

                @tf.function
                def f(x):
                    with tf.device("/gpu:99"):
                        y = tf.matmul(x, x, name="far_away")
                    with tf.device("/cpu:0"):
                        return tf.add(y, 1.0, name="on_cpu")

                f(tf.ones([2, 2]))
            report.check(expect={"^on_cpu$": "CPU:0"}, max_on={"GPU:99": 0})
            with pytest.raises(AssertionError) as failed:
                report.check(no_fallback=True)
            text = str(failed.value)
            assert "--no-fallback" in text and "far_away" in text and "on_cpu" not in text, text
            with pytest.raises(AssertionError, match=r"--max-on CPU=0: (distinct )?placements on CPU"):
                report.check(max_on={"CPU": 0}, include_plumbing=True)
            with pytest.raises(ValueError, match="--max-copy-bytes needs a report with the copies"):
                report.check(max_copy_bytes=10)
    """))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=300)
    result.assert_outcomes(passed=1)


def test_the_fixture_is_documented_where_capture_is() -> None:
    text = (Path(__file__).parent.parent / "docs" / "check.md").read_text()
    assert "def test_" in text and "placement.capture()" in text and "report.check(" in text


_EARLIER = """
    import tensorflow as tf


    def test_earlier_tensorflow():  # the process's first op: TensorFlow's context starts here
        assert float(tf.reduce_sum(tf.ones([3]))) == 3.0
"""


@pytest.mark.tf
def test_the_fixture_sees_every_op_after_other_tensorflow_tests(pytester: pytest.Pytester) -> None:
    """Tests run in any order, several to a process: a gate after a test that already ran TensorFlow
    ops still sees the eager ops and tf.functions inside its capture (issue 27, item 16)."""
    pytester.makepyfile(test_a_first=_EARLIER, test_b_gate="""
        import tensorflow as tf

        MATMULS = {"MatMul", "_MklMatMul", "_MklNativeMatMul"}


        def test_gate(placement):
            with placement.capture() as report:
                with tf.device("/cpu:0"):
                    tf.matmul(tf.ones([2, 2]), tf.ones([2, 2]))

                    @tf.function
                    def f(x):
                        return tf.add(x, 1.0, name="plus_one")

                    f(tf.ones([2]))
            assert report.complete, report.problems
            assert any(p.kind == "eager" and p.op in MATMULS for p in report.placements), report.placements
            report.check(expect={"^plus_one$": "CPU:0"})
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", timeout=300)
    result.assert_outcomes(passed=2)


@pytest.mark.tf
def test_a_gate_that_calls_a_function_an_earlier_test_ran_never_passes(pytester: pytest.Pytester) -> None:
    """TensorFlow logs a tf.function's placements once, when it first places it: a gate that calls a
    model function an earlier test already ran sees only its call line, and its rules passed on the
    call alone (`max_on={"GPU": 0}` with the body unseen). The capture says it is incomplete; a function
    traced before the block but first run inside it is seen whole."""
    pytester.makepyfile(shared_model="""
        import tensorflow as tf


        @tf.function
        def model(x):
            return tf.reduce_sum(tf.nn.relu(tf.matmul(x, x, name="body_matmul")))


        @tf.function
        def fresh(x):
            return tf.abs(x, name="fresh_abs") * 2.0
    """, test_a_first="""
        import tensorflow as tf
        from shared_model import model


        def test_train(placement):
            assert float(model(tf.ones([2, 2]))) == 8.0
    """, test_b_gate="""
        import tensorflow as tf
        from shared_model import fresh, model


        def test_gate_on_a_function_run_before(placement):
            with placement.capture() as report:
                model(tf.ones([2, 2]))
            assert not any(p.node == "body_matmul" for p in report.placements)  # TensorFlow did not log it again
            report.check(max_on={"GPU": 0})


        def test_gate_on_a_function_traced_before_and_run_inside(placement):
            fresh.get_concrete_function(tf.TensorSpec([2], tf.float32))
            with placement.capture() as report:
                fresh(tf.ones([2]))
            assert report.complete, report.problems
            report.check(expect={"^fresh_abs$": "CPU"})
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", timeout=300)
    result.assert_outcomes(passed=2, failed=1)
    text = result.stdout.str()
    assert "the capture is incomplete" in text and "which TensorFlow had placed before the block began" in text, text


@pytest.mark.tf
def test_a_capture_after_an_op_at_import_says_what_to_do_in_pytest(pytester: pytest.Pytester) -> None:
    """An op run while the tests are collected (at a module's import) comes before the plugin can
    switch logging on: the gate fails, with advice for pytest (not a notebook's kernel restart)."""
    pytester.makepyfile(test_gate="""
        import tensorflow as tf

        ONES = tf.ones([2])  # an op at import: TensorFlow's context starts while pytest collects


        def test_gate(placement):
            with placement.capture() as report:
                with tf.device("/cpu:0"):
                    tf.add(ONES, 1.0)
            report.check(max_on={"GPU": 0})
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=300)
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert "the capture is incomplete" in text and "Move that op into a test or a fixture" in text, text
    assert "restart the kernel" not in text


def test_a_path_that_is_no_report_raises_a_standard_exception(tmp_path: Path) -> None:
    """placement.check(PATH): a missing file is FileNotFoundError, a folder IsADirectoryError, a file
    that is no log or report ValueError (never placement's private InputError)."""
    from placement_cli.pytest_plugin import PlacementFixture

    fixture = PlacementFixture()
    with pytest.raises(FileNotFoundError) as missing:
        fixture.check(tmp_path / "missing.json", max_on={"CPU": 3})
    assert missing.value.filename == str(tmp_path / "missing.json")
    with pytest.raises(IsADirectoryError):
        fixture.check(tmp_path, max_on={"CPU": 3})
    (tmp_path / "empty.json").write_text("")
    with pytest.raises(ValueError, match="empty input") as empty:
        fixture.check(str(tmp_path / "empty.json"), max_on={"CPU": 3})
    assert type(empty.value) is ValueError


def test_a_fixture_asked_for_as_the_test_runs_gets_its_own_advice(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: a test that asked with request.getfixturevalue("placement") after other tests ran TF ops
    was told of "an op at import or collection"; no collected test had asked for the fixture, so the
    plugin had not switched logging on: the advice names that and its remedy."""
    from types import SimpleNamespace

    from placement_cli import pytest_plugin

    monkeypatch.setattr(pytest_plugin, "_STATE", {"hook": None, "on": None, "asked": None})
    pytest_plugin.pytest_collection_finish(SimpleNamespace(items=[SimpleNamespace(fixturenames=["request"])]))
    text = pytest_plugin.advice()
    assert "request.getfixturevalue" in text and "def test_x(placement)" in text
    assert 'usefixtures("placement")' in text and "import or collection" not in text
    monkeypatch.setattr(pytest_plugin, "log_from_the_start", lambda: None)  # a collected test asked: TF untouched
    pytest_plugin.pytest_collection_finish(SimpleNamespace(items=[SimpleNamespace(fixturenames=["placement"])]))
    assert "import or collection" in pytest_plugin.advice()
