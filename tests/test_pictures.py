"""Pictures: --svg (the tables), --dot and --graph-svg (the graph by assigned device), --tensorboard.

The TensorFlow runs are shared through module fixtures, in one TensorFlow start-up (run_batch): one tower
run writes every picture at once (and one plain run is compared with it), one train run writes DOT and
TensorBoard beside its JSON."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len
from rich.console import Console

from conftest import LOGS, read_dot, run_batch, run_cli
from placement_cli.devices import try_parse
from placement_cli.exceptions import UsageProblem
from placement_cli.model import Copy, Edge, Placement, Report
from placement_cli.outputs import check_file, write_file
from placement_cli.render.graph import depths, dot_string, render_dot, render_graph_svg
from placement_cli.render.svg import FONT_STACK, fit_cells, offline
from processes import patience
import itertools

SVG = "{http://www.w3.org/2000/svg}"
TOWER = ["tower", "--devices", "/cpu:1,/cpu:2", "--cpus", "3", "--copies"]
LOG = str(next(LOGS.joinpath("tf2.21").glob("*.log")))


# ----------------------------------------------------------------------------------- shared runs

@pytest.fixture(scope="module")
def shared_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The tower runs and the train run in one TensorFlow start-up (all on 3 logical CPUs)."""
    where = tmp_path_factory.mktemp("tower")
    files = {"svg": where / "t.svg", "dot": where / "t.dot", "graph": where / "g.svg", "tb": where / "tb"}
    # step stats without --copies: the traced run must still execute the guide's graph, not a folded one
    files["tb_plain"] = where / "tb_plain"
    trained = tmp_path_factory.mktemp("train")
    train_files = {"dot": trained / "t.dot", "graph": trained / "g.svg", "tb": trained / "tb"}
    pictured, plain, unfolded, train = run_batch(
        [*TOWER, "--svg", str(files["svg"]), "--dot", str(files["dot"]), "--graph-svg", str(files["graph"]),
         "--tensorboard", str(files["tb"])],
        TOWER,
        [*TOWER[:-1], "--tensorboard", str(files["tb_plain"])],
        ["train", "--copies", "--steps", "2", "--all", "--json", "--dot", str(train_files["dot"]),
         "--graph-svg", str(train_files["graph"]), "--tensorboard", str(train_files["tb"])])
    return {"tower": (files, pictured, plain, unfolded), "train": (train_files, train)}


@pytest.fixture(scope="module")
def tower_run(shared_runs: dict[str, Any]) -> dict[str, Any]:
    files, pictured, plain, unfolded = shared_runs["tower"]
    assert unfolded.returncode == 0, unfolded.stderr[-3000:]
    return {"files": files, "pictured": pictured, "plain": plain}


@pytest.fixture(scope="module")
def train_run(shared_runs: dict[str, Any]) -> dict[str, Any]:
    files, proc = shared_runs["train"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"files": files, "report": json.loads(proc.stdout), "stderr": proc.stderr}


def _assigned(report: dict[str, Any]) -> dict[str, str]:
    return {p["node"]: p["canonical"] for p in report["placements"] if p["kind"] == "placer"}


# ------------------------------------------------------------------------------------------ --svg

def test_svg_is_the_terminal_output_and_leaves_it_unchanged(tower_run: dict[str, Any]) -> None:
    pictured, plain = tower_run["pictured"], tower_run["plain"]
    assert pictured.returncode == 0, pictured.stderr[-3000:]
    assert pictured.stdout == plain.stdout
    text = tower_run["files"]["svg"].read_text()
    root = ET.fromstring(text)  # valid XML
    assert root.tag == f"{SVG}svg"
    drawn = "".join(root.itertext()).replace("\xa0", " ")
    for word in ("Placements", "MatMul_1", "AddN", "as requested", "16 B"):
        assert word in drawn
    assert not re.search(r"url\(\s*[\"']?https?:", text) and "@font-face" not in text
    assert "monospace" in text and "Noto Sans CJK SC" in text


def test_parse_svg_without_tensorflow(tmp_path: Path) -> None:
    out = tmp_path / "p.svg"
    plain = run_cli("parse", LOG)
    pictured = run_cli("parse", LOG, "--svg", str(out))
    assert pictured.returncode == plain.returncode == 0
    assert pictured.stdout == plain.stdout
    drawn = "".join(ET.parse(out).getroot().itertext()).replace("\xa0", " ")
    assert "Per device" in drawn


HOSTILE_LOG = (
    "InvalidArgumentError: Cannot assign a device for operation [red]x[/red]\x1b[31m\x00<b>&amp; 名字😀: Operation "
    "was explicitly assigned to /device:GPU:0 but available devices are [ /job:localhost/replica:0/task:0/device:CPU:0 ]."
    " Make sure the device specification refers to a valid device.\n"
    "Executing op [bold]Op\x1b[1m名😀<i> in device /job:localhost/replica:0/task:0/device:CPU:0\n"
    "plain: (Const): /job:localhost/replica:0/task:0/device:CPU:0\n")


def _runs(svg: str) -> list[tuple[float, float, float, str]]:
    """Each ``<text>`` drawn with a textLength: (y, x, textLength, its text)."""
    return [(float(t.get("y")), float(t.get("x")), float(t.get("textLength")), t.text or "")
            for t in ET.fromstring(svg).iter(f"{SVG}text") if t.get("textLength") is not None]


def _check_cells(svg: str) -> None:
    """Every run is as long as its cells (cells x one cell width) and starts where the one before it ends."""
    runs = _runs(svg)
    cell = {round(length / len(text), 6) for _, _, length, text in runs if text.isascii()}
    assert len(cell) == 1, cell  # one cell width, as rich draws ASCII
    width = cell.pop()
    for _, _, length, text in runs:
        assert length == pytest.approx(cell_len(text) * width), text
    for (y, x, length, _), (y2, x2, _, text) in itertools.pairwise(runs):
        assert y2 != y or x2 >= x + length - 1e-6, text  # no run drawn over the one before it


def test_a_chinese_svg_draws_every_run_on_its_cells(tmp_path: Path) -> None:
    """rich gives each run characters x cell width: a Chinese word or an emoji (two cells a character)
    was squeezed into half its cells and the borders after it drifted."""
    log = tmp_path / "h.log"
    log.write_bytes(HOSTILE_LOG.encode())
    out = tmp_path / "zh.svg"
    proc = run_cli("parse", str(log), "--lang", "zh", "--svg", str(out))
    assert proc.returncode == 0, proc.stderr
    svg = out.read_text(encoding="utf-8")
    drawn = "".join(t.text or "" for t in ET.fromstring(svg).iter(f"{SVG}text")).replace("\xa0", " ")
    assert "放置" in drawn and "名字😀" in drawn  # wide characters, markup shown literally
    assert "[red]x[/red]" in drawn and "<b>&amp;" in drawn
    assert "[bold]Op" not in drawn  # not an op type: that line is left out, never guessed
    assert "\x1b" not in svg and "\x00" not in svg
    assert any(cell_len(text) != len(text) for *_, text in _runs(svg))
    _check_cells(svg)


def test_offline_svg_links_no_web_font() -> None:
    console = Console(record=True, file=io.StringIO(), width=40)
    console.print("a 张量 😀 e\u0301 [x]", markup=False)
    svg = fit_cells(offline(console.export_svg(title="t", clear=False)))
    ET.fromstring(svg)
    assert "@font-face" not in svg and not re.search(r"url\(\s*[\"']?https?:", svg)
    assert svg.count(FONT_STACK) == 2  # the matrix and the title
    _check_cells(svg)
    assert "".join(text for *_, text in _runs(svg)).replace("\xa0", " ").rstrip() == "a 张量 😀 e\u0301 [x]"


def test_runs_already_measured_in_cells_are_kept() -> None:
    """The bound on rich: should its export measure runs in cells one day, fit_cells changes nothing."""
    svg = ('<svg xmlns="http://www.w3.org/2000/svg"><text x="0" y="20" textLength="24.4">ab</text>'
           '<text x="24.4" y="20" textLength="48.8">张量</text></svg>')
    assert fit_cells(svg) == svg


# ------------------------------------------------------------------------------------------ --dot

def test_dot_colours_and_groups_every_node_by_its_assigned_device(train_run: dict[str, Any]) -> None:
    dot = read_dot(train_run["files"]["dot"].read_text())
    assigned = _assigned(train_run["report"])
    short = {d: try_parse(d).short for d in set(assigned.values())}
    colours = [c["colour"] for c in dot["clusters"].values()]
    assert len(set(colours)) == len(colours) == len(set(assigned.values())) == 3
    assert dot["nodes"]
    for node in dot["nodes"].values():
        assert node["cluster"] == short[assigned[node["name"]]]
        assert node["fill"] == dot["clusters"][node["cluster"]]["colour"]
    names = {nid: n["name"] for nid, n in dot["nodes"].items()}
    crossing = [(a, b, attrs) for a, b, attrs in dot["edges"]
                if dot["nodes"][a]["cluster"] != dot["nodes"][b]["cluster"]]
    assert crossing
    for a, b, attrs in crossing:
        assert "#c0392b" in attrs, (names[a], names[b])
    sizes = [int(m.replace(",", "")) for m in re.findall(r'label="copy ([\d,]+) B', "\n".join(a for *_, a in crossing))]
    assert sizes and all(s > 0 for s in sizes)
    # the towers are logical CPUs on any machine (train's default): they share one memory, and the picture
    # says that nothing really moved
    measured = [attrs for *_, attrs in crossing if re.search(r'label="copy [\d,]+ B', attrs)]
    assert measured and all("(one memory: nothing moved)" in attrs for attrs in measured)
    inside = [attrs for a, b, attrs in dot["edges"] if dot["nodes"][a]["cluster"] == dot["nodes"][b]["cluster"]]
    assert inside and not any("copy" in attrs for attrs in inside)


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed here (placement does not need it)")
def test_graphviz_renders_the_dot(train_run: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "g.svg"
    subprocess.run(["dot", "-Tsvg", str(train_run["files"]["dot"]), "-o", str(out)], check=True, timeout=patience(120))
    assert ET.parse(out).getroot().tag == f"{SVG}svg"


def _hostile_report() -> Report:
    names = ['say "hi"', "back\\slash\\N", "two\nlines", "<b>bold</b>", "[red]x", "n\x00ul\x1b[31m", "张量😀"]
    devices = ["/job:localhost/replica:0/task:0/device:CPU:0", "/job:localhost/replica:0/task:0/device:CPU:1"]
    placements = tuple(Placement(n, "Op", devices[i % 2], try_parse(devices[i % 2]), "placer", i + 1)
                       for i, n in enumerate(names))
    edges = tuple(Edge(a, b) for a, b in itertools.pairwise(names))
    copies = (Copy("say \"hi\":0", devices[0], devices[1], dtype="float32", bytes=24, producer='say "hi"'),)
    return Report(placements=placements, edges=edges, copies=copies, title="t")


def test_dot_shows_hostile_names_literally() -> None:
    text = render_dot(_hostile_report())
    dot = read_dot(text)
    assert {n["name"] for n in dot["nodes"].values()} == {'say "hi"', "back\\slash\\N", "two", "<b>bold</b>", "[red]x",
                                                          "n\N{REPLACEMENT CHARACTER}ul\N{REPLACEMENT CHARACTER}[31m", "张量😀"}
    assert '"two\\nlines\\nOp"' in text  # a newline in a name stays a line break of the label
    assert len(dot["edges"]) == 6 and all("#c0392b" in attrs for *_, attrs in dot["edges"])
    assert 'label="copy 24 B"' in text
    assert dot_string("a\x1b[31m") == '"a\N{REPLACEMENT CHARACTER}[31m"'


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed here")
def test_graphviz_reads_hostile_names() -> None:
    done = subprocess.run(["dot", "-Tsvg"], input=render_dot(_hostile_report()).encode(), check=True,
                          capture_output=True, timeout=patience(60))
    assert not done.stderr.strip(), done.stderr  # no syntax warning
    drawn = [t.text or "" for t in ET.fromstring(done.stdout).iter(f"{SVG}text")]
    for name in ('say "hi"', "<b>bold</b>", "[red]x", "张量😀", "n\N{REPLACEMENT CHARACTER}ul\N{REPLACEMENT CHARACTER}[31m"):
        assert name in drawn, (name, drawn)


# ------------------------------------------------------------------------------------ --graph-svg

def _lanes_and_copies(path: Path) -> tuple[list[str], list[Any], list[Any]]:
    root = ET.parse(path).getroot()
    groups = list(root.iter(f"{SVG}g"))
    lanes = [g.get("data-device") for g in groups if g.get("class") == "lane"]
    nodes = [g for g in groups if g.get("class") == "node"]
    copies = [g for g in groups if g.get("class") == "copy"]
    return lanes, nodes, copies


def test_graph_svg_has_one_lane_per_device_and_the_copies(tower_run: dict[str, Any], train_run: dict[str, Any]) -> None:
    lanes, nodes, copies = _lanes_and_copies(tower_run["files"]["graph"])
    assert [try_parse(d).short for d in lanes] == ["CPU:0", "CPU:1", "CPU:2"]
    assert {n.get("data-device") for n in nodes} == set(lanes) and len(nodes) == 7
    labels = sorted("".join(c.itertext()) for c in copies)
    assert labels == ["copy 16 B (one memory: nothing moved)"] * 2  # logical CPUs: the copies move no bytes
    assert sorted(c.get("data-from") for c in copies) == ["MatMul", "MatMul_1"]
    lanes, nodes, copies = _lanes_and_copies(train_run["files"]["graph"])
    assigned = _assigned(train_run["report"])
    assert set(lanes) == set(assigned.values())
    assert copies and all(assigned[c.get("data-from")] != assigned[c.get("data-to")] for c in copies)


def test_hostile_names_make_valid_svg() -> None:
    root = ET.fromstring(render_graph_svg(_hostile_report()))
    titles = {"".join(t.itertext()) for g in root.iter(f"{SVG}g") if g.get("class") == "node" for t in g}
    for name in ("<b>bold</b>", "[red]x", "张量😀", "n\N{REPLACEMENT CHARACTER}ul\N{REPLACEMENT CHARACTER}[31m"):
        assert any(name in t for t in titles), (name, titles)


def test_graph_svg_cuts_names_by_cells_and_keeps_them_whole_in_the_title() -> None:
    """A node box holds 22 cells of its name: a wide character counts two, so a Chinese name fits its box."""
    cpu = "/job:localhost/replica:0/task:0/device:CPU:0"
    names = ["张量" * 15, "a" * 40]
    report = Report(placements=tuple(Placement(n, "Op", cpu, try_parse(cpu), "placer", i + 1) for i, n in enumerate(names)),
                    edges=(Edge(names[0], names[1]),), title="t")
    root = ET.fromstring(render_graph_svg(report))
    for g in (g for g in root.iter(f"{SVG}g") if g.get("class") == "node"):
        title = "".join(g.find(f"{SVG}title").itertext())
        shown = g.findall(f"{SVG}text")[0].text or ""
        assert title.split(" (")[0] in names and shown.endswith("\N{HORIZONTAL ELLIPSIS}")
        assert 20 <= cell_len(shown) <= 22, shown


def test_depth_is_the_longest_path_and_survives_cycles() -> None:
    found = depths(["a", "b", "c", "d", "k"], [("a", "b"), ("b", "c"), ("a", "c"), ("c", "d"), ("d", "c"), ("k", "d")])
    assert found["a"] == 0 and found["b"] == 1 and found["c"] >= 2 and found["d"] > found["c"] - 1
    assert found["k"] == found["d"] - 1  # a source sits just before its consumer


# ---------------------------------------------------------------------------------- --tensorboard

@pytest.fixture(scope="module")
def events(tower_run: dict[str, Any], train_run: dict[str, Any]) -> dict[str, Any]:
    """Each run's event file read back with TensorFlow (one start-up for both): its GraphDef's node
    devices and its run-metadata tags with their number of devices."""
    code = (
        "import sys, json, tensorflow as tf\n"
        "found = []\n"
        "for path in sys.argv[1:]:\n"
        "    gd, tags, ran = None, [], {}\n"
        "    for e in tf.compat.v1.train.summary_iterator(path):\n"
        "        if e.graph_def: gd = tf.compat.v1.GraphDef.FromString(e.graph_def)\n"
        "        if e.HasField('tagged_run_metadata'):\n"
        "            rm = tf.compat.v1.RunMetadata.FromString(e.tagged_run_metadata.run_metadata)\n"
        "            tags.append([e.tagged_run_metadata.tag, len(rm.step_stats.dev_stats)])\n"
        "            ran = {d.device: [n.node_name for n in d.node_stats] for d in rm.step_stats.dev_stats}\n"
        "    shapes = {n.name: [[d.size for d in s.dim] for s in n.attr['_output_shapes'].list.shape]\n"
        "              for n in gd.node if '_output_shapes' in n.attr}\n"
        "    with tf.Graph().as_default() as g:\n"
        "        tf.graph_util.import_graph_def(gd, name='')\n"
        "        outputs = {op.name: len(op.outputs) for op in g.get_operations()}\n"
        "    found.append({'nodes': {n.name: n.device for n in gd.node}, 'tags': tags, 'ran': ran, 'shapes': shapes,\n"
        "                  'outputs': outputs})\n"
        "print(json.dumps(found))\n")
    paths = []
    for folder in (tower_run["files"]["tb"], train_run["files"]["tb"], tower_run["files"]["tb_plain"]):
        files = list(folder.iterdir())
        assert len(files) == 1 and files[0].name.startswith("events.out.tfevents")
        paths.append(str(files[0]))
    proc = subprocess.run([sys.executable, "-c", code, *paths], capture_output=True, text=True, timeout=patience(120),
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    tower, train, unfolded = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"tower": tower, "train": train, "unfolded": unfolded}


def test_tensorboard_graph_carries_every_assigned_device(train_run: dict[str, Any], events: dict[str, Any]) -> None:
    nodes, tags = events["train"]["nodes"], events["train"]["tags"]
    assigned = _assigned(train_run["report"])
    assert set(nodes) == set(assigned)  # the placer log names every node of the graph
    for name, device in nodes.items():
        assert try_parse(device).canonical == assigned[name], name
    assert tags and tags[0][0] == "step1" and tags[0][1] >= 3  # step stats of three devices
    assert "tensorboard --logdir" in train_run["stderr"]


def test_tensorboard_of_the_tower_run(events: dict[str, Any]) -> None:
    nodes = events["tower"]["nodes"]
    assert {n: try_parse(d).short for n, d in nodes.items()} == {
        "Const": "CPU:1", "Const_1": "CPU:1", "MatMul": "CPU:1", "Const_2": "CPU:2", "Const_3": "CPU:2",
        "MatMul_1": "CPU:2", "AddN": "CPU:0"}


def test_tensorboard_graph_has_output_shapes_as_tensorflows_writer_writes(events: dict[str, Any]) -> None:
    """TensorBoard draws an edge without a shape as a wide grey wedge over the labels."""
    assert events["tower"]["shapes"] == {
        "Const": [[2, 3]], "Const_1": [[3, 2]], "MatMul": [[2, 2]], "Const_2": [[2, 3]], "Const_3": [[3, 2]],
        "MatMul_1": [[2, 2]], "AddN": [[2, 2]]}
    train = events["train"]
    assert {name for name, n in train["outputs"].items() if n} == set(train["shapes"])  # every node with outputs
    assert all(len(train["shapes"][name]) == n for name, n in train["outputs"].items() if n)
    matmuls = [shapes for name, shapes in train["shapes"].items() if name.rsplit("/", 1)[-1] == "MatMul"]
    assert matmuls and all(len(shapes) == 1 and len(shapes[0]) == 2 for shapes in matmuls), matmuls


def test_tensorboard_step_stats_are_of_the_guides_graph_with_or_without_copies(events: dict[str, Any]) -> None:
    """Without --copies the traced run used to be constant-folded: one AddN of a folded constant.
    The step stats must be those of the guide's own nodes, on the devices they were placed on."""
    for run in (events["unfolded"], events["tower"]):
        ran: dict[str, set[str]] = {}
        for device, names in run["ran"].items():  # a GPU machine's trace may add stream entries: not ours
            nodes = {n for n in names if not n.startswith("_")}
            if nodes:
                spec = try_parse(device)
                ran[spec.short if spec else device] = nodes
        assert ran == {"CPU:0": {"AddN"}, "CPU:1": {"Const", "Const_1", "MatMul"},
                       "CPU:2": {"Const_2", "Const_3", "MatMul_1"}}, ran
        assert len(run["tags"]) == 1 and run["tags"][0][0] == "step1" and run["tags"][0][1] >= 3


# --------------------------------------------------------------------------- refusals (no TensorFlow)

REFUSED = [
    (["show", "--mode", "eager", "--tensorboard", "{tmp}/tb"], "--tensorboard needs --mode graph"),
    (["show", "--json", "--svg", "{tmp}/x.svg"], "--json prints none"),
    (["show", "--svg", "{tmp}/missing/x.svg"], "no such directory"),
    (["show", "--dot", "{tmp}"], "is a directory"),
    (["show", "--dot", "{tmp}/same", "--graph-svg", "{tmp}/same"], "both name"),
    (["show", "--svg", "{tmp}/exists.svg"], "the file exists (add --force"),
    (["train", "--tensorboard", "{tmp}/exists.svg"], "is not a folder"),
    (["show", "--svg", "{tmp}/tb", "--tensorboard", "{tmp}/tb"], "both name"),
    (["parse", "{log}", "--svg", "{log}", "--force"], "that is an input of this command"),
    (["show", "--svg", "--json"], "--svg --json: looks like an option"),  # no file named --json is written
    (["tower", "--dot", "--all"], "--dot --all: looks like an option"),
    (["train", "--tensorboard", "-x"], "--tensorboard -x: looks like an option"),
]


@pytest.fixture(scope="module")
def refused(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, ...], tuple[Path, Any]]:
    """Each refusal in a folder of its own, all run in one process (run_batch): each is refused before it runs."""
    folders = [tmp_path_factory.mktemp("refused") for _ in REFUSED]
    for folder in folders:
        (folder / "exists.svg").write_text("keep me")
    runs = run_batch(*([a.format(tmp=folder, log=LOG) for a in args] for folder, (args, _) in zip(folders, REFUSED)))
    return {tuple(args): (folder, proc) for folder, (args, _), proc in zip(folders, REFUSED, runs)}


@pytest.mark.parametrize(("args", "says"), REFUSED)
def test_pictures_are_refused_before_anything_runs(refused: dict[tuple[str, ...], tuple[Path, Any]],
                                                    args: list[str], says: str) -> None:
    tmp_path, proc = refused[tuple(args)]
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr and proc.stderr.count("\n") <= 12 and "Traceback" not in proc.stderr
    assert "Placements" not in proc.stdout
    assert (tmp_path / "exists.svg").read_text() == "keep me"
    assert not any(Path(a).exists() for a in args if a.startswith("-") and a not in ("--all", "--force", "--json"))


def test_unwritable_folder_is_exit_2(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes in any folder")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    proc = run_cli("parse", LOG, "--svg", str(locked / "x.svg"))
    assert proc.returncode == 2 and "permission denied" in proc.stderr


def test_write_file_keeps_or_replaces_whole(tmp_path: Path) -> None:
    target = tmp_path / "p.svg"
    write_file(str(target), "one", force=False)
    assert target.read_text() == "one"
    with pytest.raises(UsageProblem):
        check_file("--svg", str(target), force=False)
    with pytest.raises(UsageProblem):  # appeared between the check and the write: kept
        write_file(str(target), "two", force=False)
    assert target.read_text() == "one"
    check_file("--svg", str(target), force=True)
    write_file(str(target), "two", force=True)
    assert target.read_text() == "two"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.svg"]  # no temporary file left behind


def test_trace_draws_the_graphs_its_script_built(tmp_path: Path) -> None:
    script = Path(__file__).parent.parent / "samples" / "tf1_session.py"
    dot_file, svg_file = tmp_path / "t.dot", tmp_path / "t.svg"
    proc = run_cli("trace", "--json", "--dot", str(dot_file), "--graph-svg", str(svg_file), str(script))
    assert proc.returncode == 0, proc.stderr[-3000:]
    dot = read_dot(dot_file.read_text())
    names = {nid: n["name"] for nid, n in dot["nodes"].items()}
    assert sorted(names.values()) == ["MatMul", "a", "b"]
    assert sorted((names[a], names[b]) for a, b, _ in dot["edges"]) == [("a", "MatMul"), ("b", "MatMul")]
    # a and b are pinned to /cpu:0; the unpinned MatMul goes where TensorFlow put it (a GPU, where there is one)
    assigned = _assigned(json.loads(proc.stdout))
    assert try_parse(assigned["a"]).short == try_parse(assigned["b"]).short == "CPU:0"
    lanes, nodes, _ = _lanes_and_copies(svg_file)
    assert sorted(lanes) == sorted({assigned[n] for n in ("a", "b", "MatMul")}) and len(nodes) == 3
    assert {n.get("data-device") for n in nodes} == set(lanes)


def test_devices_svg_draws_its_tables(tmp_path: Path) -> None:
    out = tmp_path / "d.svg"
    proc = run_cli("devices", "--cpus", "2", "--svg", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    drawn = "".join(ET.parse(out).getroot().itertext()).replace("\xa0", " ")
    assert "CPU:1" in drawn and "CPU:1" in proc.stdout


def test_plumbing_is_left_out_and_the_picture_says_so() -> None:
    device = "/job:localhost/replica:0/task:0/device:CPU:0"
    spec = try_parse(device)
    report = Report(placements=(Placement("x", "_Arg", device, spec, "placer", 1),
                                Placement("y", "Neg", device, spec, "placer", 2)),
                    edges=(Edge("x", "y"),), title="t")
    dot = read_dot(render_dot(report))
    assert [n["name"] for n in dot["nodes"].values()] == ["y"] and not dot["edges"]
    assert "1 TensorFlow plumbing nodes" in render_dot(report)
    assert "1 TensorFlow plumbing nodes" in "".join(ET.fromstring(render_graph_svg(report)).itertext())
    assert "edges unknown" in render_dot(Report(placements=report.placements, title="t"))


def test_eager_ops_and_empty_pictures_say_what_is_missing() -> None:
    device = "/job:localhost/replica:0/task:0/device:CPU:0"
    eager = Placement(None, "MatMul", device, try_parse(device), "eager", 1)
    text = render_dot(Report(placements=(eager,), edges=(), title="t"))
    assert "1 eager ops not drawn" in text and "no graph node to draw" in text and "nothing was placed" not in text
    assert "nothing was placed" in render_dot(Report(title="t"))
    ET.fromstring(render_graph_svg(Report(title="t")))  # an empty picture is still a valid SVG


def test_force_replaces_an_existing_picture(tmp_path: Path) -> None:
    out = tmp_path / "p.svg"
    out.write_text("old slide")
    proc = run_cli("parse", LOG, "--svg", str(out), "--force")
    assert proc.returncode == 0, proc.stderr
    assert ET.parse(out).getroot().tag == f"{SVG}svg"


def test_a_picture_that_cannot_be_written_after_all_is_one_line_exit_2(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    import placement_cli.outputs
    from placement_cli.cli import app

    def full_disk(path: str, text: str, force: bool) -> None:
        raise OSError(28, "No space left on device", path)

    monkeypatch.setattr(placement_cli.outputs, "write_file", full_disk)
    result = CliRunner().invoke(app, ["parse", LOG, "--svg", str(tmp_path / "p.svg")])
    assert result.exit_code == 2
    assert "--svg" in result.output and "No space left on device" in result.output
    assert "Traceback" not in result.output


def test_special_files_are_written_into_never_replaced(tmp_path: Path) -> None:
    check_file("--svg", os.devnull, force=False)  # no --force needed: nothing is replaced
    write_file(os.devnull, "<svg/>", force=True)
    assert os.path.exists(os.devnull) and not os.path.isfile(os.devnull)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        check_file("--dot", str(fifo), force=False)
        write_file(str(fifo), "digraph {}", force=True)
        assert os.read(reader, 100) == b"digraph {}"
    finally:
        os.close(reader)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"] and not fifo.is_file()


def test_a_link_stays_a_link_and_its_file_is_written(tmp_path: Path) -> None:
    real = tmp_path / "real.svg"
    real.write_text("old")
    link = tmp_path / "link.svg"
    link.symlink_to(real)
    with pytest.raises(UsageProblem, match="add --force"):
        check_file("--svg", str(link), force=False)
    write_file(str(link), "new", force=True)
    assert link.is_symlink() and real.read_text() == "new"
    dangling = tmp_path / "dangling.svg"
    dangling.symlink_to(tmp_path / "made.svg")
    check_file("--svg", str(dangling), force=True)
    write_file(str(dangling), "made", force=True)
    assert dangling.is_symlink() and (tmp_path / "made.svg").read_text() == "made"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".placement-")]


@pytest.mark.parametrize("name, says", [("missing/../x.svg", "no such directory"), ("x" * 300 + ".svg", "too long")])
def test_paths_the_system_would_refuse_are_refused_early(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         name: str, says: str) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageProblem, match=says):
        check_file("--svg", name, force=True)


def test_a_picture_that_appeared_meanwhile_keeps_a_failed_runs_exit_1(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import typer

    import placement_cli.outputs
    from placement_cli.cli.emit import _Printer, _save_pictures
    from placement_cli.cli.outcome import Pictures

    def appeared(path: str, text: str, force: bool) -> None:
        raise UsageProblem(f"{path}: the file appeared meanwhile; kept it (add --force to overwrite it)")

    monkeypatch.setattr(placement_cli.outputs, "write_file", appeared)
    report = Report()
    printer = _Printer(record=False)
    with pytest.raises(typer.Exit) as ended:  # the run itself failed
        _save_pictures(printer, Pictures(dot=str(tmp_path / "p.dot")), report, 1, keep_code=False)
    assert ended.value.exit_code == 1
    with pytest.raises(typer.Exit) as ended:
        _save_pictures(printer, Pictures(dot=str(tmp_path / "p.dot")), report, 0, keep_code=False)
    assert ended.value.exit_code == 2


def test_every_device_has_its_own_colour_and_lanes_count_as_people_do() -> None:
    from placement_cli.render.graph import picture

    devices = [f"/job:localhost/replica:0/task:0/device:CPU:{i}" for i in range(14)]
    placements = tuple(Placement(node=f"n{i}", op="Const", device=d, spec=try_parse(d), kind="placer", line=i)
                       for i, d in enumerate(devices))
    pic = picture(Report(placements=placements, edges=()))
    assert [pic.short(d) for d in pic.devices] == [f"CPU:{i}" for i in range(14)]  # CPU:2 before CPU:10
    colours = [pic.colour(d) for d in pic.devices]
    assert len(set(colours)) == 14 and all(re.fullmatch(r"#[0-9a-f]{6}", c) for c in colours)
    dot = read_dot(render_dot(Report(placements=placements, edges=())))
    assert len({c["colour"] for c in dot["clusters"].values()}) == 14


def test_a_tensor_read_by_several_nodes_on_a_device_is_one_copy_with_its_bytes_once() -> None:
    cpu0, cpu1 = "/job:localhost/replica:0/task:0/device:CPU:0", "/job:localhost/replica:0/task:0/device:CPU:1"
    placements = tuple(Placement(node=n, op="Op", device=d, spec=try_parse(d), kind="placer", line=i)
                       for i, (n, d) in enumerate([("w", cpu0), ("a", cpu1), ("b", cpu1)]))
    report = Report(placements=placements, edges=(Edge("w", "a"), Edge("w", "b")),
                    copies=(Copy(tensor="w:0", source=cpu0, target=cpu1, bytes=120, producer="w", consumer="a"),))
    dot = render_dot(report)
    assert dot.count('label="copy 120 B"') == 1 and dot.count('label="same copy"') == 1


def test_a_folder_made_for_tensorboard_and_left_empty_is_removed(tmp_path: Path) -> None:
    from placement_cli import outputs

    kept = tmp_path / "kept"
    kept.mkdir()
    outputs.check_folder("--tensorboard", str(kept / "a" / "b"))
    outputs.check_folder("--tensorboard", str(tmp_path / "used"))
    (tmp_path / "used" / "events").write_text("x")
    outputs.remove_empty_made()
    assert kept.is_dir() and not (kept / "a").exists()  # only what it made, and only while empty
    assert (tmp_path / "used" / "events").exists()


def test_svg_is_as_wide_as_the_widest_line_printed(tmp_path: Path) -> None:
    """Output that is not a terminal keeps whole node names past the console's width: so does the SVG."""
    name = "very/long/" * 15 + "MatMul"
    log = tmp_path / "long.log"
    log.write_text(f"{name}: (MatMul): /job:localhost/replica:0/task:0/device:CPU:0\n")
    proc = run_cli("parse", str(log), "--svg", str(tmp_path / "l.svg"), env={"COLUMNS": "80"})
    assert proc.returncode == 0 and name in proc.stdout
    text = "".join(t.text or "" for t in ET.parse(tmp_path / "l.svg").getroot().iter(f"{SVG}text"))
    assert name in text.replace("\xa0", " ")


def test_the_commands_own_input_and_output_files_are_never_replaced(tmp_path: Path) -> None:
    log = tmp_path / "in.log"
    log.write_bytes(Path(LOG).read_bytes())
    with log.open("rb") as stdin:
        proc = subprocess.run([sys.executable, "-m", "placement_cli", "parse", "-", "--svg", "/dev/stdin", "--force"],
                              stdin=stdin, capture_output=True, text=True, timeout=patience(60))
    assert proc.returncode == 2 and "standard input or output" in proc.stderr
    assert log.read_bytes() == Path(LOG).read_bytes()
    out = tmp_path / "out.txt"
    for target in ("/dev/stdout", str(out)):  # stdout redirected to a file: that file
        with out.open("w") as stdout:
            proc = subprocess.run([sys.executable, "-m", "placement_cli", "parse", LOG, "--svg", target, "--force"],
                                  stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=patience(60))
        assert proc.returncode == 2 and "standard input or output" in proc.stderr


def test_a_picture_into_a_closed_pipe_is_no_error_and_a_replaced_file_keeps_its_mode(tmp_path: Path) -> None:
    proc = subprocess.run(f"{sys.executable} -m placement_cli parse {LOG} --svg /dev/stdout | head -c 10; "
                          "exit ${PIPESTATUS[0]}", shell=True, capture_output=True, text=True, timeout=patience(60),
                          executable="/bin/bash")
    assert proc.returncode == 0, proc.stderr  # the reader had all it wanted: no error
    assert "Traceback" not in proc.stderr and "Broken pipe" not in proc.stderr
    private = tmp_path / "p.svg"
    private.write_text("old")
    private.chmod(0o600)
    assert run_cli("parse", LOG, "--svg", str(private), "--force").returncode == 0
    assert (private.stat().st_mode & 0o777) == 0o600 and private.read_text().startswith("<svg")


def test_a_file_name_with_a_newline_is_one_line_of_error(tmp_path: Path) -> None:
    proc = run_cli("parse", LOG, "--svg", str(tmp_path / "no\nsuch" / "x.svg"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "no\\nsuch" in proc.stderr


def test_trace_keeps_the_scripts_exit_code_when_a_picture_cannot_be_written(tmp_path: Path) -> None:
    script = tmp_path / "makes_it.py"
    script.write_text("import sys\nopen(sys.argv[1], 'w').write('mine')\nsys.exit(3)\n")
    dot = tmp_path / "mine.dot"
    proc = run_cli("trace", "--dot", str(dot), str(script), str(dot))
    assert proc.returncode == 3, proc.stderr  # the script's own code, whatever happened to the picture
    assert dot.read_text() == "mine" and "appeared meanwhile" in proc.stderr


# ------------------------------------------------ inlined functions, picture widths, the last line

def test_inlined_function_bodies_and_lowered_branches_get_their_edges() -> None:
    """TensorFlow logs a function it inlined under its call (``StatefulPartitionedCall/dense/MatMul``,
    nested ``model/PartitionedCall_2/StatefulPartitionedCall/mul``) and a lowered tf.cond branch under
    ``cond/then/_0``, while the recorded graphs name the nodes ``dense/MatMul``, ``mul``, ``cond/mm``:
    the edges join them, in a cluster's picture within one task (``worker/1: ...``); a name scope of
    the graph's own (``tower_0/``) borrows no other graph's edge; the inliner's input/output nodes
    are plumbing."""
    device = "/job:localhost/replica:0/task:0/device:CPU:0"
    names = [("StatefulPartitionedCall/dense/MatMul", "MatMul"), ("StatefulPartitionedCall/dense/BiasAdd", "BiasAdd"),
             ("model/PartitionedCall_2/StatefulPartitionedCall/x", "Const"),
             ("model/PartitionedCall_2/StatefulPartitionedCall/mul", "Mul"),
             ("cond/then/_0/cond/a", "Const"), ("cond/then/_0/cond/mm", "MatMul"),
             ("while/body/_9/while/loopmul", "Mul"), ("while/body/_9/while/one", "Const"),
             ("tower_0/MatMul", "MatMul"), ("tower_0/add", "AddV2"),
             ("worker/1: StatefulPartitionedCall/w/x", "Const"), ("worker/1: StatefulPartitionedCall/w/MatMul", "MatMul"),
             ("Func/StatefulPartitionedCall/input/_0", "Identity"),
             ("Func/StatefulPartitionedCall/output_control_node/_3", "NoOp")]
    spec = try_parse(device)
    report = Report(placements=tuple(Placement(n, op, device, spec, "placer", i + 1) for i, (n, op) in enumerate(names)),
                    edges=(Edge("dense/MatMul", "dense/BiasAdd"), Edge("x", "mul"), Edge("cond/a", "cond/mm"),
                           Edge("while/one", "while/loopmul", control=True), Edge("MatMul", "add"),
                           Edge("worker/1: w/x", "worker/1: w/MatMul"), Edge("worker/0: w/x", "worker/0: w/MatMul"),
                           Edge("w/x", "w/MatMul")), title="t")
    text = render_dot(report)
    dot = read_dot(text)
    names_of = {nid: n["name"] for nid, n in dot["nodes"].items()}
    drawn = sorted((names_of[a], names_of[b], "dashed" in attrs) for a, b, attrs in dot["edges"])
    assert drawn == [("StatefulPartitionedCall/dense/MatMul", "StatefulPartitionedCall/dense/BiasAdd", False),
                     ("cond/then/_0/cond/a", "cond/then/_0/cond/mm", False),
                     ("model/PartitionedCall_2/StatefulPartitionedCall/x",
                      "model/PartitionedCall_2/StatefulPartitionedCall/mul", False),
                     ("while/body/_9/while/one", "while/body/_9/while/loopmul", True),
                     ("worker/1: StatefulPartitionedCall/w/x", "worker/1: StatefulPartitionedCall/w/MatMul", False)]
    assert not any(n.startswith("Func/") for n in names_of.values())
    assert "2 TensorFlow plumbing nodes" in text
    svg = ET.fromstring(render_graph_svg(report))
    assert len(svg.findall(f"{SVG}line")) == 5


def _px(value: str | None) -> float:
    return float((value or "0").removesuffix("px"))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_short_graph_svg_is_as_wide_as_its_title_and_notes(lang: str) -> None:
    """A graph of a few unjoined nodes (--top 25 of a parsed run) was one column, 210 px: its title and
    notes were cut at the edge. The canvas holds every text at least at an average glyph's width
    (0.6 em a cell bold, 0.55 em plain; a Chinese character is two cells)."""
    from placement_cli import i18n

    device = "/job:localhost/replica:0/task:0/device:CPU:0"
    spec = try_parse(device)
    placements = (*(Placement(f"n{i}", "Const", device, spec, "placer", i + 1) for i in range(3)),
                  Placement("x", "_Arg", device, spec, "placer", 9), Placement(None, "MatMul", device, spec, "eager", 10))
    with i18n.speaking(lang):
        svg = ET.fromstring(render_graph_svg(Report(placements=placements, title="Guide towers on /gpu:0, /gpu:1 [soft]")))
    width = _px(svg.get("width"))
    assert svg.get("viewBox") == f"0 0 {svg.get('width')} {svg.get('height')}"
    texts = [t for t in svg.iter(f"{SVG}text") if t.text]
    notes = [t for t in texts if t.get("fill") == "#555"]
    assert len(notes) == 3  # plumbing, eager ops, edges unknown
    for t in texts:
        size = _px(t.get("font-size") or svg.get("font-size"))
        em = 0.6 if t.get("font-weight") == "bold" else 0.55
        assert _px(t.get("x")) + cell_len(t.text) * size * em <= width, (t.text, width)


def _clips(root: ET.Element) -> dict[str, tuple[float, float]]:
    """Each clip path's rectangle: (top, bottom)."""
    found = {}
    for clip in root.iter(f"{SVG}clipPath"):
        rect = clip.find(f"{SVG}rect")
        top = float(rect.get("y", "0"))
        found[clip.get("id")] = (top, top + float(rect.get("height")))
    return found


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_svg_draws_the_last_line_whole(tmp_path: Path, lang: str) -> None:
    """rich clips its terminal just under the last line's baseline and names a clip for that line it
    never defines: in a browser ``TF_ENABLE_ONEDNN_OPTS=0`` read ``TF ENABLE ONEDNN OPTS=0``. Every run
    names a clip that exists, and each clip around it reaches a quarter em under its baseline (an
    underscore, a descender)."""
    log = tmp_path / "mkl.log"
    log.write_text("I0000 00:00:1.0 1 execute.cc:1775] Executing op _MklMatMul in device "
                   "/job:localhost/replica:0/task:0/device:CPU:0\n")
    out = tmp_path / "p.svg"
    proc = run_cli("parse", str(log), "--lang", lang, "--svg", str(out))
    assert proc.returncode == 0, proc.stderr
    text = out.read_text(encoding="utf-8")
    root = ET.fromstring(text)
    size = float(re.search(r"font-size:\s*([0-9.]+)px", text).group(1))
    clips = _clips(root)
    terminal = next(v for k, v in clips.items() if k.endswith("-clip-terminal"))
    runs = [t for t in root.iter(f"{SVG}text") if t.get("clip-path") and (t.text or "").strip()]
    last = max(float(t.get("y")) for t in runs)
    assert "TF_ENABLE_ONEDNN_OPTS=0" in "".join(t.text or "" for t in runs if float(t.get("y")) == last)
    for t in runs:
        clip = re.fullmatch(r"url\(#(.+)\)", t.get("clip-path")).group(1)
        assert clip in clips, clip
        baseline = float(t.get("y"))
        assert clips[clip][1] >= baseline + size / 4 and terminal[1] >= baseline + size / 4, (t.text, clips[clip])
