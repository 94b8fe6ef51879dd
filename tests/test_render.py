"""Renderers without TensorFlow: widths, digests, hints that fit, text shown literally, any encoding."""

from __future__ import annotations

import io
import os
import re
from dataclasses import replace

import pytest
from rich.cells import cell_len
from rich.console import Console

from placement_cli.messages import one_line
from placement_cli.model import Origin, PlacementFailure, Report
from placement_cli.render.console import AsciiSafe, make_console, screen_rows
from placement_cli.render.digest import MAX_KEYS, MAX_SCOPE_DEPTH, scope_counts, scope_depth, scope_of
from placement_cli.render.rows import cut_middle
from placement_cli.render.table import Hints, View, failure_panel, hint, onednn_note, report_group
from reports import CPU0, GPU, as_run, big_report, placed, tower_report, trace_report

KINDS = ["device_not_found", "no_kernel", "colocation", "invalid_device_spec", "unsatisfiable", "some_new_kind"]
CONTEXTS = {
    "show/tower": Hints.run_command(soft=False),
    "show/tower --soft": Hints.run_command(soft=True),
    "trace": Hints(source="program"),
    "parse": Hints(source="log"),
}


def text_of(renderable: object, width: int = 80) -> str:
    console = Console(record=True, width=width, color_system=None, file=open(os.devnull, "w"))
    console.print(renderable, crop=False)
    return console.export_text()


def lines_of(report: Report, width: int, view: View | None = None) -> list[str]:
    return text_of(report_group(as_run(report), view=view), width).splitlines()


def test_node_names_are_cut_in_the_middle_keeping_their_tail() -> None:
    name = "tower_1/gradients/layer_5/block_123/MatMul_grad/MatMul_1"
    assert cut_middle(name, 40) == "tower_1/gradients/…/MatMul_grad/MatMul_1"
    assert cut_middle(name, len(name)) == name
    for width in range(4, len(name)):
        cut = cut_middle(name, width)
        assert len(cut) <= width and "…" in cut and cut.endswith(cut.split("…")[-1])
        assert name.endswith(cut.split("…")[-1]) and name.startswith(cut.split("…")[0])


@pytest.mark.parametrize("width", [40, 60, 80, 100, 120])
def test_terminal_widths_never_cut_devices_or_statuses_and_keep_rows_apart(width: int) -> None:
    report = trace_report()
    lines = lines_of(report, width)
    assert all(len(line.rstrip()) <= width for line in lines), "\n".join(lines)
    text = "\n".join(lines)
    assert "CPU…" not in text and "GPU…" not in text and "fall…" not in text
    assert text.count("soft fallback") >= 3 and text.count("as requested") >= 3
    rows = [line for line in lines if "MatMul" in line and ("GPU:" in line or "CPU:" in line)]
    names = [line for line in lines if "tower_" in line and "does not exist" not in line]
    assert len(set(names)) == len(names), "two different nodes rendered alike"
    assert rows or names


def test_columns_zero_or_one_still_draw(monkeypatch: pytest.MonkeyPatch) -> None:
    for columns in ("0", "1", "-5", "abc", ""):
        monkeypatch.setenv("COLUMNS", columns)
        console = make_console(io.StringIO())
        assert console.width >= 20
        console.print(report_group(as_run(trace_report())))
        assert "tower_1" in console.file.getvalue()


def test_not_a_terminal_keeps_every_name_whole() -> None:
    report = trace_report()
    text = "\n".join(lines_of(report, 40, View(fit=False)))
    for p in report.placements:
        if p.node:
            assert p.node.replace("\x1b", "\ufffd") in text
    assert "…" not in text.split("Per device")[0]


def test_screen_rows_when_not_a_terminal_is_fixed() -> None:
    assert screen_rows(io.StringIO()) == 40


def test_the_digest_says_how_many_ops_run_with_their_resource_instead_of_listing_them() -> None:
    """Ops placed with their resource (TensorFlow's rule) are not where they asked, yet no fallback:
    the "worth a look" digest leaves them out and says so, never "every op sits where it asked"."""
    from dataclasses import replace

    from placement_cli.model import WITH_RESOURCE

    report = big_report()
    ruled = [replace(p, status=WITH_RESOURCE, reason="with its variable v") if p.op == "Identity" else p
             for p in report.placements]
    digest = "\n".join(lines_of(replace(report, placements=tuple(ruled)), 200))
    count = sum(p.status == WITH_RESOURCE for p in ruled)
    assert f"{count} ops run with their resource" in " ".join(digest.split())
    quiet = [p for p in ruled if p.status == WITH_RESOURCE or (p.op == "MatMul" and p.node.startswith("tower_0"))]
    alone = "\n".join(lines_of(replace(report, placements=tuple(quiet)), 200))
    assert "Every op sits where it asked" not in alone and "run with their resource" in " ".join(alone.split())


def test_a_long_report_is_a_digest_and_all_rows_prints_every_row() -> None:
    report = big_report()
    digest = "\n".join(lines_of(report, 120))
    assert "do not fit a screen" in digest and "--all" in digest
    assert "Per op type and device" in digest and "Per name scope" in digest
    assert "Worth a look" in digest
    for reason in ("GPU:2 does not exist", "GPU:3 does not exist", "no GPU kernel registered for StringJoin"):
        assert reason in digest.split("Why here?")[0], reason  # every reason shows among the rows
    assert "tower_0/model/layer_7/MatMul" not in digest  # rows where they asked are summed, not listed
    everything = "\n".join(lines_of(report, 120, View(all_rows=True)))
    assert "do not fit" not in everything
    for p in report.placements:
        assert p.node in everything


def test_short_reports_stay_full_tables() -> None:
    text = "\n".join(lines_of(tower_report(), 80))
    assert "digest" not in text and "Placements" in text
    assert all(n in text for n in ("MatMul_1", "Const_3", "AddN"))


def test_digest_counts_per_op_and_scope_per_device() -> None:
    text = text_of(report_group(as_run(big_report())), 120)
    per_op = text.split("Per op type and device")[1].split("Per name scope")[0]
    assert re.search(r"MatMul\s+│\s+120\s+│\s+60\s+│\s+60\s+│\s+240", per_op)
    per_scope = text.split("Per name scope (first 2 levels) and device")[1]
    assert re.search(r"tower_2/model\s+│\s+120\s+│\s+-\s+│\s+-\s+│\s+120", per_scope)


def test_the_digest_says_what_its_op_and_scope_counts_leave_out_that_per_device_counts() -> None:
    """A traced Keras training loop: Per device counted 977 placements, Per op type and per name scope
    715, without a word (TensorFlow's _Arg/_Retval and eager ops' wrapper functions are left out of
    those two). The digest now says how many, so the tables add up."""
    report = big_report()
    extra = [placed(f"step/arg_{i}", "_Arg", CPU0, 1000 + i) for i in range(7)]
    extra += [replace(placed("Abs", "Abs", CPU0, 1100 + i), wrapper=True) for i in range(3)]
    lines = text_of(report_group(as_run(replace(report, placements=report.placements + tuple(extra)))), 200).splitlines()
    text = " ".join(" ".join(lines).split())
    assert "Per op type and per name scope leave out 10 placements of TensorFlow's plumbing" in text
    assert "which Per device counts (--json has all)" in text

    def column(title: str, index: int) -> int:  # the sum of a column of the table titled so
        start = next(i for i, line in enumerate(lines) if line.strip().startswith(title))
        end = next(i for i in range(start, len(lines)) if lines[i].startswith("└"))
        cells = [line.strip(" │").split("│") for line in lines[start + 4:end] if line.startswith("│")]
        return sum(int(row[index].strip().rstrip("%")) for row in cells)

    assert column("Per device", -2) == len(report.placements) + 10  # ops, share
    assert column("Per op type and device", -1) == len(report.placements)
    assert "leave out" not in " ".join(text_of(report_group(as_run(report)), 200).split())  # nothing left out


def test_scope_counts_in_one_pass_are_the_counts_at_the_chosen_depth() -> None:
    """scope_counts reads each row once (a big diff's rows are made as they are read) and gives what
    choosing the depth first, then counting at it, gives."""
    import random
    from collections import Counter

    rng = random.Random(7)
    for trial in range(60):
        width = rng.choice([2, 4, 8, 20])
        rows = [(rng.choice([None, "op", *(f"s{rng.randrange(width)}/t{rng.randrange(width)}/u{rng.randrange(3)}/v{k}"
                                          for k in range(3))]), rng.choice(["CPU:0", "GPU:0"]), rng.randrange(1, 4))
                for _ in range(rng.randrange(1, 300))]
        names = {node for node, _device, _n in rows}
        depth = 1
        for deeper in range(2, MAX_SCOPE_DEPTH + 1):
            if len({scope_of(n, deeper) for n in names}) > MAX_KEYS:
                break
            depth = deeper
        expected: Counter[tuple[str, str]] = Counter()
        for node, device, n in rows:
            expected[scope_of(node, depth), device] += n
        assert scope_counts(iter(rows)) == (depth, expected), trial


def test_scope_depth_is_bounded_by_the_number_of_scopes() -> None:
    assert scope_of(None, 2) == "(eager ops)" and scope_of("MatMul", 2) == "(top level)"
    assert scope_of("a/b/c/d", 2) == "a/b" and scope_of("a/b", 3) == "a"
    wide = [f"model/layer_{i}/MatMul" for i in range(100)]
    assert scope_depth(wide) == 1
    assert scope_depth([f"tower_{t}/dense/kernel/x" for t in range(4)]) == 3


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("context", CONTEXTS)
def test_hints_name_only_what_the_command_offers(kind: str, context: str) -> None:
    said = hint(PlacementFailure(kind, "n", "/gpu:3", "msg"), CONTEXTS[context])
    options = set(re.findall(r"--[a-z-]+", said))
    if context in ("trace", "parse"):
        assert not options, said
    elif context == "show/tower --soft":
        assert "--soft" not in options, said
    assert options <= {"--soft", "--cpus"}
    if kind == "no_kernel":
        assert "device that exists" not in said and "kernel" in said
    if kind == "invalid_device_spec":
        assert "--soft" not in options and "malformed" in said
    if kind == "colocation":
        assert "share a device" in said


def test_run_commands_with_soft_off_suggest_soft_and_cpus() -> None:
    said = hint(PlacementFailure("device_not_found", "n", "/gpu:2", "m"), Hints.run_command(soft=False))
    assert "--soft" in said and "--cpus" in said


def test_default_hints_follow_the_report_kind() -> None:
    failure = PlacementFailure("device_not_found", "n", "/gpu:2", "m")
    assert "--" not in text_of(failure_panel(failure, Origin.RUN))  # capture(): the fix is in the program
    assert "pinned an op to a device that did not exist" in text_of(failure_panel(failure, Origin.LOG), 200)


HOSTILE = ["[red]x", "a[/x].py", "train[v2].py", "[bold]b[/bold]", "x\x1b[31my\x07z"]


@pytest.mark.parametrize("name", HOSTILE)
def test_user_strings_are_shown_literally_everywhere(name: str) -> None:
    shown = name.replace("\x1b", "\ufffd").replace("\x07", "\ufffd")
    failure = PlacementFailure("colocation", name, f"/job:{name}/cpu:0", f"Cannot colocate nodes {name}", ())
    report = Report(placements=(replace(placed(name, name, CPU0, 1), group=name, reason=name),),
                    title=f"trace of {name} (exit code 0)", errors=(failure,), result=[[name]])
    text = text_of(report_group(as_run(report)), 200)
    assert text.count(shown) >= 5, text
    assert "\x1b" not in text and "\x07" not in text
    digest = text_of(report_group(as_run(report), view=View(screen_rows=0)), 200)
    assert shown in digest and "\x1b" not in digest


def test_ascii_streams_degrade_characters_and_keep_columns_aligned() -> None:
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii", errors="strict", newline="\n")
    console = make_console(stream)
    report = replace(trace_report(), placements=(placed("张量/MatMul", "MatMul", GPU.format(0), 1),
                                                 placed("ascii/MatMul", "MatMul", GPU.format(0), 2)))
    console.print(AsciiSafe(report_group(as_run(report))), crop=False)
    console.print(failure_panel(PlacementFailure("no_kernel", "张量", "/gpu:0", "没有 kernel …")))
    stream.flush()
    out = raw.getvalue().decode("ascii")
    table = [line for line in out.splitlines() if "| MatMul |" in line]
    assert "????/MatMul" in out
    assert len(table) == 2 and len({len(line) for line in table}) == 1, table  # a wide character: two ?s


@pytest.mark.parametrize("encoding", ["gbk", "cp936", "big5", "latin-1"])
def test_a_legacy_code_page_keeps_what_it_can_encode_and_replaces_the_rest_per_cell(encoding: str) -> None:
    """GBK draws the real frames and Chinese but has no emoji; Big5 and Latin-1 lack the frames: each
    character the stream lacks is one ``?`` per cell (columns stay aligned), nothing raises."""
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding=encoding, errors="strict", newline="\n")
    console = make_console(stream)
    report = replace(trace_report(), placements=(placed("张量😀/MatMul", "MatMul", GPU.format(0), 1),
                                                 placed("ascii/MatMul", "MatMul", GPU.format(0), 2)))
    console.print(AsciiSafe(report_group(as_run(report))), crop=False)
    stream.flush()
    out = raw.getvalue().decode(encoding)
    rows = [line for line in out.splitlines() if "/MatMul " in line and "logged" in line]
    assert len(rows) == 2 and len({cell_len(line) for line in rows}) == 1, rows
    if encoding in ("gbk", "cp936"):
        assert "张量??/MatMul" in out and "┃" in out  # GBK has box drawing: rich's own frames
    else:
        assert "??" in out and "┃" not in out and "|" in out


def test_onednn_note_names_each_renamed_op_and_what_it_replaced() -> None:
    """Executed graphs hold oneDNN's names too (the --copies line): one note for all of them; names
    that only look like oneDNN's (``_Mkl`` alone, ``Mkl`` without the underscore) are not explained."""
    eager = placed(None, "_MklMatMul", CPU0, 1, kind="eager")
    report = Report(placements=(eager, placed("c", "_MklNativeConv2D", CPU0, 2), placed("m", "MklLike", CPU0, 3),
                                placed("x", "_Mkl", CPU0, 4)),
                    executed=(("_MklNativeFusedMatMul", 4), ("Const", 2)))
    note = onednn_note(report)
    assert note is not None
    assert note.plain.startswith("_MklMatMul, _MklNativeConv2D, _MklNativeFusedMatMul are oneDNN's versions of "
                                 "Conv2D, MatMul, MatMul fused with the ops after it:")
    assert "tf.matmul" in note.plain and "MklLike" not in note.plain
    assert onednn_note(replace(report, placements=(eager,), executed=None)).plain.startswith(
        "_MklMatMul is oneDNN's version of MatMul:")
    assert onednn_note(report, placements=False).plain.startswith("_MklNativeFusedMatMul is oneDNN's version of "
                                                                  "MatMul fused with the ops after it:")
    conv = onednn_note(replace(report, placements=(placed("c", "_MklConv2D", CPU0, 2),), executed=None))
    assert conv is not None and "tf.matmul" not in conv.plain
    assert onednn_note(replace(report, placements=(placed("m", "MatMul", CPU0, 1),), executed=None)) is None
    assert text_of(report_group(as_run(report)), 200).count("oneDNN's versions") == 1


def test_one_rule_says_when_rows_fit_a_screen() -> None:
    from placement_cli.render.view import View

    assert View(screen_rows=3).fits(3) and not View(screen_rows=3).fits(4)
    assert View(all_rows=True, screen_rows=3).fits(99)


def test_a_cluster_start_up_event_is_a_model_value_said_in_one_line() -> None:
    from placement_cli.model import ClusterEvent
    from placement_cli.render.cluster import progress_line

    ready = ClusterEvent.from_dict({"event": "ready", "task": "worker/0", "address": "localhost:2222", "pid": 7,
                                    "seconds": 1.5, "extra": "ignored"})
    assert progress_line(ready) == "worker/0 ready on localhost:2222 (pid 7, 1.5 s)"
    assert "ports listen on every interface" in progress_line(ClusterEvent("isolation", isolated=False, why="w"))
    assert progress_line(ClusterEvent("isolation", isolated=True)) is None
    assert progress_line(ClusterEvent("started", task="ps/0")) is None


@pytest.mark.parametrize("mark", ["\u202e", "\u2066", "\u200f", "\u200b", "\ufeff", "\u061c"])
def test_invisible_and_bidi_format_characters_are_shown_not_obeyed(mark: str) -> None:
    """A name with U+202E (right-to-left override) reversed the rest of its table row on a terminal
    ("CPU:1" read "1:UPC"), and one with U+200B looked like the name without it; on an ASCII stream
    the zero-width mark became a "?" the column had no room for. Such marks are shown, as U+FFFD, as
    control characters are, in every table and in one-line names."""
    name = f"evil{mark}/MatMul"
    report = Report(placements=(replace(placed(name, "MatMul", CPU0, 1), reason=name),),
                    title=f"trace of {name} (exit code 0)")
    text = text_of(report_group(as_run(report)), 200)
    assert mark not in text and "evil\ufffd/MatMul" in text
    assert mark not in one_line(name)


def test_every_kind_of_error_has_a_hint_wherever_it_is_shown() -> None:
    """The hints are a table: every kind of placement error, under every command that may show it
    (a program's, a log's, a lesson's with or without --soft to offer), has one; a colocation whose
    group required a device has its own."""
    from placement_cli.model import FailureKind
    from placement_cli.render.hints import HINTS, Advice

    wanted = {(kind, False, advice) for kind in FailureKind for advice in Advice}
    wanted |= {(FailureKind.COLOCATION, True, advice) for advice in Advice}
    assert set(HINTS) == wanted
    for source, soft in (("program", None), ("log", None), ("options", False), ("options", True), ("options", None)):
        for kind in FailureKind:
            for group in (None, "/device:GPU:1"):
                said = hint(PlacementFailure(kind, "n", "/gpu:3", "msg", group_device=group), Hints(source, soft))
                assert said and "{" not in said, (kind, source, soft, said)
