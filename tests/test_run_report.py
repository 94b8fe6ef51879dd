"""How a run's report is assembled, without TensorFlow: errors in TensorFlow's words, eager spans of the log."""

from __future__ import annotations

from placement_cli.model import PlacementFailure, Report
from placement_cli.logparse.causes import essential
from placement_cli.runtime.run import Trial, outcome, split_marks, spans_of, _MARK

GRAPH_MESSAGE = """Graph execution error:

Detected at node 'a' defined at (most recent call last):
    File "/tmp/x.py", line 8, in <module>
    File "/tmp/y.py", line 9, in build
Node: 'a'
Malformed device specification '/device:GPU:99999999999999999999' in node: {name:'a' id:2}
\t [[a]]"""


def test_a_run_without_its_result_fails_in_tensorflows_words_even_when_the_parser_knows_none() -> None:
    trial = Trial(error="Something TensorFlow never said before.\nSecond line.", error_class="UnknownError",
                  error_node="MatMul", error_device="/device:GPU:0",
                  available=("/job:localhost/replica:0/task:0/device:CPU:0",))
    errors, run_error = outcome((), trial)
    assert run_error == "UnknownError: Something TensorFlow never said before.\nSecond line."
    (failure,) = errors
    assert failure.kind == "run_failed" and failure.message.startswith("Something TensorFlow never said before.")
    assert (failure.node, failure.requested_device) == ("MatMul", "/device:GPU:0")
    assert failure.available_devices == trial.available
    assert Report(errors=errors, run_error=run_error).failed


def test_a_parsed_error_is_kept_and_the_run_error_still_recorded() -> None:
    parsed = (PlacementFailure("device_not_found", "MatMul", "/device:GPU:2", "Cannot assign a device ..."),)
    errors, run_error = outcome(parsed, Trial(error="Cannot assign a device ...", error_class="InvalidArgumentError"))
    assert errors == parsed and run_error == "InvalidArgumentError: Cannot assign a device ..."


def test_a_run_with_its_result_has_no_run_error() -> None:
    assert outcome((), Trial(result=[[1.0]])) == ((), None)
    assert not Report(result=[[1.0]]).failed


def test_no_result_and_no_exception_is_still_a_failure() -> None:
    errors, run_error = outcome((), Trial())
    assert errors[0].kind == "run_failed" and run_error == "Error: the run produced no result"


def test_graph_mode_messages_lose_the_python_traceback_tensorflow_adds() -> None:
    assert essential(GRAPH_MESSAGE) == ("Malformed device specification '/device:GPU:99999999999999999999' "
                                        "in node: {name:'a' id:2}")
    eager = "/job:ps/replica:0/task:3/device:CPU:0 unknown device."
    assert essential(eager) == eager
    assert essential("\n\n") == "\n\n"  # nothing left: the message as it was


def test_marks_split_the_log_into_the_lines_each_span_wrote() -> None:
    log = f"start\n{_MARK}\nwrapper\nExecuting op A\n{_MARK}\n{_MARK}\n\nExecuting op B\n{_MARK}\nend\n"
    text, marks = split_marks(log)
    assert text == "start\nwrapper\nExecuting op A\n\nExecuting op B\nend\n"
    trial = Trial(spans=[("/cpu:1", "tower 0", False), (None, None, True)])
    first, second = spans_of(trial, marks)
    lines = text.split("\n")
    assert lines[first.first - 1: first.last] == ["wrapper", "Executing op A"] and first.requested == "/cpu:1"
    assert lines[second.first - 1: second.last] == ["", "Executing op B"] and second.calls_function


def test_a_mark_after_an_unfinished_line_keeps_both_parts() -> None:
    text, marks = split_marks(f"abc{_MARK}\ndef\n")
    assert text == "abc\ndef\n" and marks == [1]


def test_a_log_without_marks_is_untouched() -> None:
    assert split_marks("a\nb\n") == ("a\nb\n", [])


def test_a_message_of_several_root_errors_is_headed_by_its_first_and_the_hint_names_no_pin() -> None:
    from placement_cli.logparse.causes import headline
    from placement_cli.render.hints import hint
    from placement_cli.render.view import Hints

    message = ("2 root error(s) found.\n  (0) INVALID_ARGUMENT:  Only compiling NCCL/auto collective is supported, "
               "got: ring\nStack trace for op definition:\n  (1) INVALID_ARGUMENT:  Only compiling ...\n"
               "0 successful operations.\n0 derived errors ignored. [Op:__inference_train_step_319]")
    assert headline(message) == ("2 root error(s) found. (0) INVALID_ARGUMENT: Only compiling NCCL/auto collective is "
                                 "supported, got: ring")
    assert headline("Cannot assign a device for operation a\nmore") == "Cannot assign a device for operation a"
    assert headline("") == "" and headline("3 root error(s) found.") == "3 root error(s) found."
    failure = PlacementFailure(kind="run_failed", node=None, requested_device=None, message=message,
                               available_devices=())
    for source in ("options", "program", "log"):
        said = hint(failure, Hints(source=source, soft=False))
        assert "not a placement error" in said and "--soft" not in said and "pin" not in said
