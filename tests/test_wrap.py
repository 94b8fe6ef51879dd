"""Chinese lines break between characters, never inside an ASCII name nor around CJK punctuation."""

from __future__ import annotations

import io

from hypothesis import given
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from placement_cli.render.wrap import break_offsets, wrapped
import itertools

SENTENCE = ("同一个图，设置 allow_soft_placement=True：TensorFlow 把无法运行的操作移到现有的设备上"
            "（tf.config.list_logical_devices() 会列出）。")


def _lines(text: str, width: int) -> list[str]:
    cuts = [0, *break_offsets(text, width), len(text)]
    return [text[a:b].rstrip() for a, b in itertools.pairwise(cuts)]


def test_lines_are_filled_and_names_stay_whole() -> None:
    lines = _lines(SENTENCE, 36)
    assert all(cell_len(line) <= 36 for line in lines)
    assert "".join(lines).replace(" ", "") == SENTENCE.replace(" ", "")
    assert any("tf.config.list_logical_devices()" in line for line in lines)  # an API name is not split
    assert not any(line.startswith(("，", "。", "：", "）")) for line in lines)
    assert not any(line.endswith("（") for line in lines)
    chinese = "每个塔在各自的设备上计算损失和梯度，然后在 CPU 上做梯度平均，再把平均后的梯度应用到变量上。" * 3
    assert all(cell_len(line) >= 34 for line in _lines(chinese, 36)[:-1])  # full lines, not ragged


@given(st.text(alphabet="设备放置ab c，。（）_.", max_size=200), st.integers(2, 60))  # a wide character is 2 cells
def test_no_line_is_wider_than_asked_and_nothing_is_lost(text: str, width: int) -> None:
    lines = _lines(text, width)
    assert all(cell_len(line) <= width for line in lines)
    assert "".join(lines).replace(" ", "") == text.replace(" ", "")


def test_in_a_panel_styles_and_blank_lines_are_kept() -> None:
    out = io.StringIO()
    body = Text("节点: x\n\n")
    body.append(SENTENCE, style="italic")
    Console(file=out, width=40, force_terminal=True).print(Panel(wrapped(body)))
    drawn = out.getvalue()
    assert "\x1b[3m" in drawn  # italic survives the breaking
    assert "│                                      │" in drawn  # the blank line
    assert wrapped(Text("plain English")) .plain == "plain English"  # no wide character: rich's own wrap
