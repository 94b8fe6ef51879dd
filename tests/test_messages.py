"""Reasons, titles and roles are i18n Messages: their English is the JSON, their translation is made
from the template and the fields (never from the English), they survive pickling, and the modules
that make them need nothing of render/ (no TensorFlow)."""

from __future__ import annotations

import json
import pickle
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from rich.console import Console

from placement_cli import i18n, messages
from placement_cli.i18n import Message
from placement_cli.model import FREE, Report
from placement_cli.render.json import as_json
from placement_cli.render.table import report_group
from reports import as_run, trace_report

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import layers


@pytest.fixture
def zh():
    with i18n.speaking("zh"):
        yield


def test_a_message_is_its_english_and_keeps_its_template_and_fields() -> None:
    reason = Message(messages.MISSING, device="GPU:2", names=messages.NONE_LISTED)
    assert reason == "GPU:2 does not exist (have: none listed)" and not isinstance(reason, str)  # compared as its English
    assert reason.english == "GPU:2 does not exist (have: none listed)" == str(reason)  # str() shows it (English here)
    assert f"{reason:>45}" == f"{reason.english:>45}" and f"{reason}" == reason.english  # formatted as its text
    assert json.dumps({"reason": reason}, default=as_json) == '{"reason": "GPU:2 does not exist (have: none listed)"}'
    assert reason.template == messages.MISSING and reason.fields["names"] is messages.NONE_LISTED
    assert {reason: 1}["GPU:2 does not exist (have: none listed)"] == 1  # a dict key as its English


def test_the_translation_comes_from_the_fields_not_from_the_english(zh) -> None:
    """A name field holding English words (a node called like a reason) is shown as it is: nothing
    is parsed back out of the English text."""
    partner = "x on CPU:0, colocated with y"
    reason = Message(messages.COLOCATED, partner=partner, device="CPU:0")
    shown = i18n.shown(reason)
    assert shown != reason and partner in shown and "colocated" not in shown.replace(partner, "")
    assert i18n.shown(Message(messages.MISSING, device="GPU:2", names=messages.NONE_LISTED)) == \
        i18n.shown(Message(messages.MISSING, device="GPU:2", names=Message(messages.NONE_LISTED)))
    assert i18n.shown(None) == "" and i18n.shown("model/dense") == "model/dense"


def test_a_message_sent_as_json_comes_back_whole_and_anything_else_is_refused(zh) -> None:
    """The cluster's supervisor sends its messages as JSON (json.dumps would write a Message as its English):
    wire() turns each into its template and fields, and Message.from_dict makes it whole again."""
    import json

    role = messages.tower_role(3, messages.GRADIENTS)
    sent = json.loads(json.dumps(i18n.wire({"error": role, "tasks": [role], "code": 1})))
    assert sent["code"] == 1 and sent["tasks"][0] == sent["error"] != str(role)
    back = Message.from_dict(sent["error"])
    assert back == role and back.fields["part"].template == "gradients" and i18n.shown(back) == i18n.shown(role) != role
    for bad in ({"fields": {}}, {"template": 3}, {"template": "x", "fields": []}, "text"):
        with pytest.raises(ValueError, match="not a message"):
            Message.from_dict(bad)


def test_messages_survive_pickling_whole(zh) -> None:
    """A child process (the parallel parser, the cluster's tasks, inspect) pickles what it made:
    the Messages come back with their template and fields, so they still translate."""
    role = messages.tower_role(3, messages.GRADIENTS)
    back = pickle.loads(pickle.dumps(role))
    assert back == role and back.template == role.template and back.fields["part"].template == "gradients"
    assert i18n.shown(back) == i18n.shown(role) != role
    report = trace_report()
    copied = pickle.loads(pickle.dumps(report))
    assert copied == report and copied.placements[0].status.template == report.placements[0].status.template
    assert all(type(a.reason) is type(b.reason) for a, b in zip(copied.placements, report.placements))
    assert _text(copied) == _text(report)  # the same Chinese table from the copy


def test_a_statuss_json_is_english_and_its_table_is_translated(zh) -> None:
    report = Report(placements=tuple(p for p in trace_report().placements if p.status == FREE)[:1])
    assert as_run(report).to_dict()["placements"][0]["status"] == "free"
    assert "free" not in _text(report) and i18n.shown(FREE) in _text(report)


def test_the_makers_of_messages_import_nothing_of_render_and_render_has_no_cycle() -> None:
    """why.py, the lessons and the tracer make reasons, titles and roles: they import no renderer;
    render/ imports no producer of reasons (why.py), and its modules import each other one way."""
    known = layers.modules()
    graph = defaultdict(set)
    for name, path in known.items():
        graph[name] = layers.imports(name, path, known)
    makers = [m for m in known if m == "placement_cli.why" or m.startswith("placement_cli.lessons")] + \
        ["placement_cli.runtime.trace.tracer"]
    for maker in makers:
        assert not [t for t in graph[maker] if t.startswith("placement_cli.render")], maker
    for module in (m for m in known if m.startswith("placement_cli.render")):
        assert "placement_cli.why" not in graph[module], module
    assert not [c for c in layers.cycles(graph) if any(m.startswith("placement_cli.render") for m in c)]


def _text(report: Report) -> str:
    console = Console(record=True, width=100, color_system=None)
    console.print(report_group(as_run(report)))
    return console.export_text()


def test_a_value_is_cut_and_cleaned_in_one_place() -> None:
    """One home for how a user's value is cut to fit a message, and how control characters are shown."""
    from placement_cli.messages import clean, cut, one_line
    from placement_cli.render import text

    assert cut("x" * 60, 60) == "x" * 60
    assert cut("x" * 61, 60) == "x" * 57 + "..." and len(cut("y" * 99, 40, "\N{HORIZONTAL ELLIPSIS}")) == 40
    assert clean("a\tb\nc\x1b[31m") == "a\tb\nc\N{REPLACEMENT CHARACTER}[31m" and clean(None) == ""
    assert one_line("a\tb\nc") == "a\N{REPLACEMENT CHARACTER}b\N{REPLACEMENT CHARACTER}c"
    assert text.clean is clean  # the renderers' clean is this one
