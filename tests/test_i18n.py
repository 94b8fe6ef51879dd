"""--lang: the zh catalogue is complete and compiled, tables translate and stay aligned, JSON stays
English, the locale chooses the default, and an ASCII-only output falls back to English (no TensorFlow)."""

from __future__ import annotations

import os
import pty
import tty
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.cells import cell_len

from conftest import LOGS
from placement_cli import i18n, messages
from placement_cli.i18n import Message
from placement_cli.render.rows import _wrap
from reports import big_report, trace_report
from test_golden import check, render_report
from placement_cli.render.table import View

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import catalogue
from processes import checkout_first, patience

FIELD = re.compile(r"\{[^}]*\}")


@pytest.fixture
def zh():
    with i18n.speaking("zh"):
        yield


def test_every_marked_message_has_a_chinese_translation_and_nothing_is_stale() -> None:
    marked = catalogue.extract()
    entries = catalogue.parse_po(catalogue.PO.read_text())
    entries.pop("")
    assert len(marked) > 100
    assert [m for m in marked if not entries.get(m, "").strip()] == []
    assert [m for m in entries if m not in marked] == []
    for message, translated in entries.items():  # the same fields, or .format() would fail at run time
        assert sorted(FIELD.findall(message)) == sorted(FIELD.findall(translated)), message


def test_the_shipped_mo_is_the_po_compiled() -> None:
    compiled = catalogue.compile_mo(catalogue.parse_po(catalogue.PO.read_text()))
    assert catalogue.MO.read_bytes() == compiled
    assert catalogue.problems() == []


def test_a_marker_with_no_literal_is_refused(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("from placement_cli.i18n import _\nname = 'x'\n_(name)\n")
    with pytest.raises(SystemExit, match="needs one string literal"):
        catalogue.extract(tmp_path)


def test_gettext_reads_the_shipped_catalogue(zh) -> None:
    assert i18n._("Placements") == "放置"
    assert i18n._("soft fallback") == "软放置回退"


@pytest.mark.parametrize(("environ", "language"), [
    ({"LANG": "zh_CN.UTF-8"}, "zh"), ({"LANG": "zh_TW"}, "zh"), ({"LC_ALL": "zh"}, "zh"),
    ({"LANG": "en_US.UTF-8"}, "en"), ({"LANG": "C"}, "en"), ({}, "en"), ({"LANG": "fr_FR"}, "en"),
    ({"LC_ALL": "en_US.UTF-8", "LANG": "zh_CN.UTF-8"}, "en"),  # LC_ALL before LANG
    ({"LC_MESSAGES": "zh_CN.UTF-8", "LANG": "en_US"}, "zh"),
    ({"LANGUAGE": "zh_CN:en", "LC_ALL": "en_US.UTF-8"}, "zh"),  # LANGUAGE first, as gettext reads it
    ({"LANGUAGE": "", "LANG": "zh_CN.UTF-8"}, "zh"),  # empty counts as unset
])
def test_the_default_language_follows_the_locale_as_gettext_orders_it(environ, language) -> None:
    assert i18n.from_locale(environ) == language


def test_chinese_wraps_by_cells_not_characters() -> None:
    text = "GPU:2 不存在（现有：CPU:0, CPU:1, CPU:2）而且这个原因很长很长需要换行"
    lines = _wrap(text, 16)
    assert all(cell_len(line) <= 16 for line in lines)
    assert "".join(lines).replace(" ", "") == text.replace(" ", "")  # nothing lost or cut
    assert not any(line.startswith(("）", "，")) for line in lines)


@pytest.mark.parametrize("width", [40, 80])
def test_a_run_report_in_chinese_at_terminal_widths(zh, width: int) -> None:
    text = render_report(trace_report(), run=True, width=width)
    assert "节点" in text and "原因" in text
    assert all(cell_len(line) <= width for line in text.splitlines()), text
    check(f"zh__trace__{width}", text)


def test_a_digest_in_chinese(zh) -> None:
    text = render_report(big_report(), run=True, width=80, view=View(screen_rows=20))
    assert "按操作类型和设备统计" in text
    check("zh__digest__80", text)


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PYTHONPATH": checkout_first(), "COLUMNS": "80", **(env or {})}
    return subprocess.run([sys.executable, "-m", "placement_cli", *args], capture_output=True, text=True,
                          env=environ, check=False, timeout=patience(60))


def test_json_is_the_same_bytes_in_every_language() -> None:
    log = str(LOGS / "tf1.x" / "errors_mixed.log")
    english, chinese = _cli("parse", log, "--json", "--lang", "en"), _cli("parse", log, "--json", "--lang", "zh")
    assert english.returncode == chinese.returncode == 0
    assert english.stdout == chinese.stdout


def test_the_locale_chooses_chinese_and_an_ascii_output_falls_back_to_english() -> None:
    log = str(LOGS / "tf1.x" / "errors_mixed.log")
    assert "放置" in _cli("parse", log, env={"LANG": "zh_CN.UTF-8", "LC_ALL": "", "LANGUAGE": ""}).stdout
    ascii_run = _cli("parse", log, "--lang", "zh", env={"PYTHONIOENCODING": "ascii"})
    assert ascii_run.returncode == 0 and ascii_run.stdout.isascii() and "Placement error in the log" in ascii_run.stdout
    assert "English is used" in ascii_run.stderr


def _output_in(encoding: str, terminal: bool, *args: str) -> tuple[int, str, str]:
    """``placement *args`` with PYTHONIOENCODING=encoding, its stdout a file or a terminal (a pty):
    its exit code, stdout and stderr decoded."""
    environ = {**os.environ, "PYTHONPATH": checkout_first(), "COLUMNS": "100", "PYTHONIOENCODING": encoding}
    command = [sys.executable, "-m", "placement_cli", *args]
    if not terminal:
        done = subprocess.run(command, capture_output=True, env=environ, check=False, timeout=patience(60))
        return done.returncode, done.stdout.decode(encoding), done.stderr.decode(encoding)
    main, other = pty.openpty()
    tty.setraw(other)  # no newline translation: a UTF-16 stream stays whole
    with subprocess.Popen(command, stdout=other, stderr=subprocess.PIPE, env=environ) as proc:
        os.close(other)
        chunks = []
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        os.close(main)
        err = proc.stderr.read()
        code = proc.wait(timeout=patience(60))
    return code, b"".join(chunks).decode(encoding), err.decode(encoding)


# The zh catalogue is Simplified Chinese: GBK (cp936) and GB18030 encode every character of it, Big5
# (Traditional), Latin-1 and ASCII do not. GBK lacks emoji and U+FFFD: what it prints, it encodes.
@pytest.mark.parametrize("terminal", [False, True], ids=["file", "terminal"])
@pytest.mark.parametrize(("encoding", "chinese", "frames"), [
    ("gbk", True, True), ("cp936", True, True), ("gb18030", True, True), ("utf-16", True, True),
    ("utf-8", True, True), ("big5", False, False), ("latin-1", False, False), ("ascii", False, False)])
def test_chinese_is_shown_whenever_the_output_encoding_can_show_it(encoding: str, chinese: bool, frames: bool,
                                                                   terminal: bool) -> None:
    code, out, err = _output_in(encoding, terminal, "parse", str(LOGS / "tf2.21" / "guide_matmul_plain.log"),
                                "--lang", "zh")
    assert code == 0 and "Traceback" not in err and "Error" not in err, err
    assert ("放置" in out) is chinese, out
    assert ("English is used" in err) is not chinese, err
    assert ("┏" in out and "│" in out) is frames, out  # rich's frames, else its ASCII ones
    if not frames:
        assert ("+--" in out and "|" in out and out.isascii()) or encoding == "big5", out
    code, out, err = _output_in(encoding, terminal, "parse", str(LOGS / "tf1.x" / "errors_mixed.log"), "--lang", "zh")
    assert code == 0 and "Traceback" not in err and ("放置" in out + err) is chinese


def test_the_encoding_decision_is_the_catalogues_characters() -> None:
    """Every character a Chinese report prints comes from the catalogue: GBK encodes all of them,
    though it has no check mark; Big5 lacks Simplified characters such as 设."""
    found = i18n.characters("zh")
    assert "设" in found and "，" in found and "✓" not in found and i18n.characters("en") == ""
    found.encode("gbk")
    with pytest.raises(UnicodeEncodeError):
        found.encode("big5")


@pytest.mark.parametrize("english", [
    Message(messages.READ_COPY, partner="model/w1", device="CPU:0"),
    Message(messages.READ_SAME, partner="model/w1", device="CPU:0"),
    Message(messages.READ, partner="model/w1", device="CPU:0"),
    Message(messages.COLOCATED_KIND, partner="model/w1", kind="VarHandleOp", device="CPU:0"),
    Message(messages.NO_KERNEL, device_type="GPU", op="Foo"),
])
def test_every_reason_a_lesson_writes_is_translated_whole(zh, english: Message) -> None:
    """A reason made from a template comes out as that template's translation: no English is left,
    and no English text is swallowed into a device or node name."""
    shown = i18n.shown(english)
    assert not re.search(r"[a-z]{3,} [a-z]{3,}", shown.replace("model/w1", "").replace("VarHandleOp", "")), shown
    assert "CPU:0" in shown or "GPU" in shown


def test_a_name_field_cannot_swallow_free_text(zh) -> None:
    """A reason that is no Message but merely starts like a template stays as it is (English), never
    half-translated; the Message of that template is translated whole, its name fields as they are."""
    text = "colocated with model/w1 (VarHandleOp) on CPU:0, and something else entirely"
    assert i18n.shown(text) == text
    made = Message(messages.COLOCATED_KIND, partner="model/w1", kind="VarHandleOp", device="CPU:0")
    assert text.startswith(made.english) and i18n.shown(made) != made and "model/w1" in i18n.shown(made)


def test_a_neutral_change_stays_neutral_in_chinese() -> None:
    """English "went from X to Y" says nothing of the direction: the Chinese may not say it dropped or rose."""
    messages = catalogue.parse_po(catalogue.PO.read_text(encoding="utf-8"))
    neutral = {k: v for k, v in messages.items() if "went from" in k}
    assert neutral
    for english, chinese in neutral.items():
        assert not re.search("[降升增减]", chinese), (english, chinese)


def test_every_role_and_scope_label_is_translated(zh) -> None:
    """The lessons' roles (the model keeps them in English) and the digest's scopes that are no name
    are shown in Chinese; names of code (average_gradients, strategy.reduce) stay as they are."""
    from placement_cli.lessons import mirrored, train
    from placement_cli.render.digest import EAGER_SCOPE, TOP_SCOPE

    code = {"average_gradients", "apply_gradients", "all_reduce", "reduce_loss", "strategy", "reduce", "eager"}
    labels = [*train.role_order(3), *mirrored.role_order(2), EAGER_SCOPE, TOP_SCOPE,
              messages.units_role(messages.TOWER, 1, 4, messages.GRADIENTS)]
    for label in labels:
        shown = i18n.shown(label)
        leftover = set(re.findall(r"[A-Za-z_]+", shown)) - code
        assert not leftover, (label, shown)
    assert i18n.shown("model/dense") == "model/dense"  # a name scope is a name


def test_the_training_lessons_formulas_notes_and_terms_are_translated(zh) -> None:
    """What train --copies and mirrored --copies write (kept in English in the model) is shown in Chinese."""
    from placement_cli.lessons import mirrored, train

    spec = mirrored.MirroredSpec(devices=("/cpu:0", "/cpu:1"), batch=64, steps=1, lr=0.1, reduce="collective",
                                 fit=False)
    expected = mirrored.expected_bytes(spec, spec.devices)
    towers = train.TrainSpec(devices=("/cpu:1", "/cpu:1", "/cpu:2"))
    shared = train.expected_bytes(towers, 4)  # two towers share a device: the parameters go there once
    texts = [Message(messages.FORMULA_TRAIN, device="/cpu:0"), expected.formula, shared.formula, messages.NOTE_RING,
             messages.NOTE_NCCL, messages.RING_TENSOR, Message(messages.REDUCE_DEFAULT, reduce="collective"),
             messages.MODE_LOOP, messages.counted(messages.DOWN_AND_BACK, 2),
             messages.counted(messages.DOWN_AND_BACK_OF, 1, total=2), messages.FETCHED_LOSS, messages.INPUT,
             *(messages.term_label(w) for w, _ in (*expected.terms, *shared.terms))]
    code = {"x", "n", "CPU", "int", "all_reduce", "all", "reduce", "strategy", "run", "_Send", "NcclAllReduce", "NVIDIA",
            "NCCL", "GPU", "cpu", "collective", "one", "device", "MirroredStrategy", "B"}
    for text in texts:
        shown = i18n.shown(text)
        leftover = set(re.findall(r"[A-Za-z_]+", shown)) - code
        assert not leftover, (text, shown)


def test_input_errors_follow_the_language_and_keep_their_exit_code(tmp_path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    for args, zh, en in ((["parse", str(tmp_path / "missing.log")], "文件不存在", "no such file"),
                         (["parse", str(empty)], "输入为空", "empty input"),
                         (["trace", str(tmp_path / "missing.py")], "脚本不存在", "no such script")):
        chinese = _cli(args[0], "--lang", "zh", *args[1:])  # before trace's script: after it, they are its own
        english = _cli(args[0], "--lang", "en", *args[1:])
        assert chinese.returncode == english.returncode == 2
        assert zh in chinese.stderr and en in english.stderr


@pytest.mark.parametrize("args", [["--lang", "zh", str(LOGS / "tf2.21" / "h200_tower.log")],
                                  ["--lang", "zh", "/no/such/file"], ["--lang", "zh", "--bogus"], ["--lang", "en"]])
@pytest.mark.parametrize("before", ["en", "zh"])
def test_an_invocation_s_language_ends_with_it(args: list[str], before: str) -> None:
    """--lang chooses the language of one invocation (a table, a refusal, a usage error); the language
    from before it is back when it ends, whatever the ending (tests and a notebook run several)."""
    from typer.testing import CliRunner

    from placement_cli.cli import app

    with i18n.speaking(before):
        result = CliRunner().invoke(app, ["parse", *args])
        assert result.exit_code in (0, 2), result.output
        assert i18n.language() == before


def test_every_command_takes_lang_and_none_declares_it() -> None:
    """--lang is given to every command where commands are registered: no command's own function takes it."""
    import inspect

    import typer.main

    from placement_cli.cli import app

    group = typer.main.get_command(app)
    for info in app.registered_commands:
        own = inspect.unwrap(info.callback)
        assert "lang" not in inspect.signature(own).parameters, own.__name__
    assert all(any("--lang" in p.opts for p in command.params) for command in group.commands.values())
