"""Colocation errors are `colocation`, whatever their wording and version; the requests TensorFlow's placer
logged it ignored are shown with their cause, never counted as placements.

Wordings: TensorFlow's own (placer.cc / simple_placer.cc of TF 0.x-1.12, colocation_graph.cc of 1.13-2.21, whose
strings the 2.21 library holds) and real logs people posted (google/prettytensor#1, tensorflow#1310, tensorflow#21115,
DeepRec#932); one fixture log per family: tf0.x/colocation_group.log, tf1.x/colocation_wordings.log,
tf1.x/ignored_requests.log."""

from __future__ import annotations

import json

import pytest

from conftest import LOGS, run_cli
from placement_cli.i18n import english
from placement_cli.logparse import parse_paths, parse_text
from placement_cli.logparse.error_messages import failure_from_text
from placement_cli.render.table import Hints, View
from test_golden import render_report

GROUP = ("Cannot assign a device to node 'Adagrad/update_baby_names/embedding_lookup/params/SparseApplyAdagrad': "
         "Could not satisfy explicit device specification '' because the node was colocated with a group of nodes "
         "that required incompatible device '/job:localhost/replica:0/task:0/GPU:0'")

WORDINGS = [
    # TF 0.6, google/prettytensor#1: nothing was pinned; the group (the embedding variable) was on the GPU
    (GROUP, "Adagrad/update_baby_names/embedding_lookup/params/SparseApplyAdagrad", None,
     "/job:localhost/replica:0/task:0/GPU:0"),
    # TF 1.x, tensorflow#21115: a pin the group overrides
    (("Cannot assign a device for operation 'global_step/Assign': Could not satisfy explicit device specification "
     "'/job:worker/task:0' because the node was colocated with a group of nodes that required incompatible device "
     "'/job:ps/task:0'"), "global_step/Assign", "/job:worker/task:0", "/job:ps/task:0"),
    # TF 1.14+ / 2.x: the node named {{colocation_node X}}, the devices listed after
    (("Cannot assign a device for operation emb/Adam: Could not satisfy explicit device specification '' because the "
     "node {{colocation_node emb/Adam}} was colocated with a group of nodes that required incompatible device "
     "'/job:localhost/replica:0/task:0/device:GPU:0'. All available devices [/job:localhost/replica:0/task:0/device:CPU:0, "
     "/job:localhost/replica:0/task:0/device:GPU:0]. "), "emb/Adam", None, "/job:localhost/replica:0/task:0/device:GPU:0"),
    # TF 1.14, tensorflow#33447: the device assignments active during the op's creation come first
    (("Cannot assign a device for operation conv/kernel/Initializer/random_normal/mul: Could not satisfy explicit device "
     "specification '' because the node {{colocation_node conv/kernel/Initializer/random_normal/mul}} placed on device "
     "Device assignments active during op 'conv/kernel/Initializer/random_normal/mul' creation:"),
     "conv/kernel/Initializer/random_normal/mul", None, None),
    (("Cannot place the graph because a reference or resource edge connects colocation groups with incompatible "
     "assigned devices: /job:worker/replica:0/task:0/device:GPU:0 vs /job:worker/replica:0/task:0/device:CPU:0"),
     None, None, None),
    (("Cannot place the graph because a reference or resource edge connects colocation groups with incompatible "
     "resource devices: /job:ps/replica:0/task:7/device:CPU:0 vs /job:ps/replica:0/task:8/device:CPU:0"), None, None, None),
    (("Cannot assign a device for operation 'Adam/update_w/ApplyAdam': Could not colocate node with its resource and "
     "reference inputs; devices /job:ps/task:0 and /job:ps/task:1 are not compatible."), "Adam/update_w/ApplyAdam",
     None, None),
    (("Nodes were connected by a reference connection (requiring them to be on the same device), but the two nodes "
     "were assigned two different devices: Cannot colocate nodes {{colocation_node w/Assign}} and "
     "{{colocation_node w}}: Cannot merge devices with incompatible jobs: '/job:worker' and '/job:ps'"), "w/Assign",
     None, None),
    (("Cannot colocate nodes {{colocation_node Variable/read}} and {{colocation_node Variable}}: Cannot merge devices "
     "with incompatible types: '/device:CPU:0' and '/device:GPU:0'"), "Variable/read", None, None),
    ("Node 'save/SaveV2' expects to be colocated with unknown node 'v'", "save/SaveV2", None, None),
]


@pytest.mark.parametrize(("message", "node", "requested", "group"), WORDINGS)
def test_every_colocation_wording_is_colocation(message: str, node: str | None, requested: str | None,
                                                group: str | None) -> None:
    """Before: the ``Could not satisfy explicit ... colocated with a group`` forms were device_not_found, the
    others were not read at all."""
    failure = failure_from_text(message)
    assert failure is not None
    assert (failure.kind, failure.node, failure.requested_device, failure.group_device) == \
        ("colocation", node, requested, group)


def test_the_other_satisfy_wordings_keep_their_kinds() -> None:
    """The colocation test reads only ``because the node``: the sibling wordings keep theirs."""
    assert failure_from_text("Cannot assign a device to node 'a': Could not satisfy explicit device specification "
                             "'/gpu:0' because no supported kernel for GPU devices is available.").kind == "no_kernel"
    assert failure_from_text("Cannot assign a device to node 'a': Could not satisfy explicit device "
                             "specification '/gpu:3'").kind == "device_not_found"
    assert failure_from_text("Cannot assign a device for operation 'my_op': Node had no OpKernel registered to "
                             "support this operation: Operation was MyOp and inputs were [DT_FLOAT]").kind == "no_kernel"
    # TF 1.x's placer on a node a Session had placed before (errors::Internal), read before as nothing at all
    gone = failure_from_text("InternalError: Assigned device '/job:worker/replica:0/task:1/device:GPU:0' does not "
                             "match any device")
    assert (gone.kind, gone.requested_device) == ("device_not_found", "/job:worker/replica:0/task:1/device:GPU:0")
    assert failure_from_text("Assigned device '/job:localhost/replica:0/task:0/device:GPU:0' does not have "
                             "registered OpKernel support for SparseApplyAdagrad").kind == "no_kernel"


def test_an_ignored_colocation_is_no_failure() -> None:
    """TensorFlow quotes the error it ignored under soft placement: the run went on."""
    report = parse_paths([str(LOGS / "tf1.x/ignored_requests.log")])
    assert report.errors == ()
    assert failure_from_text(report.ignored[-1].message) is None


def test_the_panel_names_the_group_and_no_pin() -> None:
    report = parse_paths([str(LOGS / "tf0.x/colocation_group.log")])
    (_failure,) = report.errors
    text = render_report(report, run=False, width=100)
    assert "Placement error in the log (colocation)" in text
    assert "group requires" in text and "GPU:0" in text
    assert "colocated with a group of ops" in " ".join(text.split())
    assert "pinned an op to a device that did not exist" not in " ".join(text.split())
    options = render_report(report, run=True, width=100, view=View(hints=Hints.run_command(soft=False)))
    assert "colocated with a group of ops that required GPU:0" in " ".join(options.split())


def test_ignored_requests_are_requests_with_their_cause_not_placements() -> None:
    """Before: these lines were noise; a log of only them had "no placements found" and nothing else."""
    report = parse_paths([str(LOGS / "tf1.x/ignored_requests.log")])
    assert report.placement_count == 2  # the two placer lines; the ignored requests are not placements
    first, second, third, colocated = report.ignored
    assert (first.node, first.requested, first.cause, first.source, first.device, first.line) == \
        ("prefetch_queue_Dequeue", "/device:GPU:0", "reference_input", "prefetch_queue", "/device:CPU:0", 1)
    assert (second.node, second.requested, second.source, second.device) == \
        ("tower_0/gradients/AddN_1", "/job:worker/replica:0/task:0/device:GPU:0", "tower_0/emb",
         "/job:worker/replica:0/task:0/device:GPU:2")
    assert third.device == "/job:ps/task:7" and third.line == 5
    assert (colocated.node, colocated.cause, colocated.source, colocated.requested) == ("c", "colocation", "a", None)
    data = report.to_dict()
    assert data["ignored_requests"][1]["cause"] == "reference_input"
    assert data["summary"]["placements"] == 2
    assert "ignored_requests" not in parse_text("a: (Const): /job:localhost/replica:0/task:0/device:CPU:0\n").to_dict()
    text = " ".join(render_report(report, run=False, width=160).split())
    assert "Requests TensorFlow ignored (4, not placements)" in text
    assert "follows its reference input tower_0/emb to worker/0 GPU:2" in text


# TF 2.21, a TF1 graph whose variable asks for an absent /cpu:7, allow_soft_placement=True: colocation_graph.cc
# logs this at WARNING (always: it is no error), places the group on a candidate and the run goes on.
RESOURCES_WARNING = """\
W0000 00:00:1795669894.774675    6011 colocation_graph.cc:1216] Failed to place the graph without changing the \
devices of some resources. Some of the operations (that had to be colocated with resource generating operations) \
are not supported on the resources' devices. Current candidate devices are [
  /job:localhost/replica:0/task:0/device:CPU:0].
See below for details of this colocation group:
Colocation Debug Info:
Colocation group had the following types and supported devices: \nRoot Member(assigned_device_name_index_=-1 \
requested_device_name_='/device:CPU:7' assigned_device_name_='' resource_device_name_='/device:CPU:7' \
supported_device_types_=[CPU] possible_devices_=[]
AssignVariableOp: CPU \nVarHandleOp: CPU \nConst: CPU \n
Colocation members, user-requested devices, and framework assigned devices, if any:
  v/Initializer/zeros (Const) \n  v (VarHandleOp) /device:CPU:7
  v/Assign (AssignVariableOp) /device:CPU:7

v: (VarHandleOp): /job:localhost/replica:0/task:0/device:CPU:0
I0000 00:00:1795669894.775012    6011 placer.cc:162] v: (VarHandleOp): /job:localhost/replica:0/task:0/device:CPU:0
"""


def test_the_resource_devices_warning_is_a_warning_not_a_failure(tmp_path) -> None:
    """TensorFlow's W-level "Failed to place the graph without changing the devices of some resources" (soft
    placement moved a resource's group) was read as a colocation failure, cut at "candidates are [": it is an
    ignored request with its candidates, the group's device and first pinned member, the whole message."""
    log = tmp_path / "mini_b.log"
    log.write_text(RESOURCES_WARNING)
    report = parse_paths([str(log)])
    assert report.errors == ()
    (warning,) = report.ignored
    assert (warning.node, warning.requested, warning.cause, warning.device) == (
        "v", "/device:CPU:7", "resource_device", "/job:localhost/replica:0/task:0/device:CPU:0")
    assert warning.message.endswith("candidate devices are [\n  /job:localhost/replica:0/task:0/device:CPU:0].")
    proc = run_cli("parse", str(log))
    assert proc.returncode == 0 and "Placement failed" not in proc.stdout + proc.stderr
    assert "a warning, no failure" in proc.stdout
    data = json.loads(run_cli("parse", str(log), "--json").stdout)
    assert "errors" not in data or data["errors"] == []
    assert data["ignored_requests"][0]["cause"] == "resource_device"


def test_parse_of_a_log_of_only_ignored_requests(tmp_path) -> None:
    log = tmp_path / "worker.log"
    log.write_text((LOGS / "tf1.x/ignored_requests.log").read_text().splitlines()[1] + "\n")
    proc = run_cli("parse", str(log))
    assert proc.returncode == 0
    assert "only 1 device requests TensorFlow ignored" in proc.stderr
    assert "tower_0/gradients/AddN_1" in proc.stdout and "tower_0/emb" in proc.stdout
    data = json.loads(run_cli("parse", str(log), "--json").stdout)
    assert data["ignored_requests"][0]["node"] == "tower_0/gradients/AddN_1" and data["placements"] == []


def test_the_placement_of_an_ignored_request_shows_the_request_and_its_reference_input() -> None:
    """Before: tower_0/gradients/AddN_1's row said request `?`, status `logged`, though the log says it
    asked for GPU:0 and follows its reference input tower_0/emb to GPU:2 (TensorFlow's rule, no fallback)."""
    report = parse_paths([str(LOGS / "tf1.x/ignored_requests.log")])
    emb, add = report.placements
    assert (emb.requested, str(emb.status), emb.reason) == (None, "logged", None)  # the log says nothing of it
    assert (add.requested, str(add.status)) == ("/job:worker/replica:0/task:0/device:GPU:0", "with its resource")
    assert english(add.reason).startswith("with its reference input tower_0/emb on worker/0 GPU:2: TensorFlow's placer")
    row = report.to_dict()["placements"][1]
    assert (row["requested"], row["status"], row["reason"]) == (add.requested, "with its resource", add.reason)
    assert "requested" not in report.to_dict()["placements"][0]
    text = " ".join(render_report(report, run=False, width=200).split())
    assert "AddN │ worker/0 GPU:0 │ worker/0 GPU:2 │ with its resource │" in text
    assert "why: with its reference input tower_0/emb on worker/0 GPU:2" in text
    assert "VariableV2 │ ? │ worker/0 GPU:2 │ logged" in text
    assert not report.knows_requests  # a few requests from the log do not make it a run's report


@pytest.mark.parametrize("order", ["line first", "placement first"])
def test_an_ignored_request_goes_to_its_own_placement(order: str) -> None:
    """A line goes to the first placement of its node after it (each graph of a Session its own); a
    stdout copy read before the stderr log (the only placement of its node) gets it too; a node that
    sits on neither device keeps its request, and no reason is made up."""
    ignored = ("I placer.cc:874] Ignoring device specification /device:GPU:1 for node 'q' because the input edge "
               "from 'v' is a reference connection and already has a device field set to /device:CPU:0\n")
    placed = "q: (QueueDequeueV2): /job:localhost/replica:0/task:0/device:CPU:0\n"
    (q,) = parse_text(ignored + placed if order == "line first" else placed + ignored).placements
    assert (q.requested, str(q.status)) == ("/device:GPU:1", "with its resource")
    assert "reference input v on CPU:0" in english(q.reason)
    twice = parse_text(placed + ignored + placed).placements
    assert [str(p.status) for p in twice] == ["logged", "with its resource"]
    elsewhere = parse_text(ignored + placed.replace("CPU:0", "CPU:1")).placements[0]
    assert (elsewhere.requested, str(elsewhere.status), elsewhere.reason) == ("/device:GPU:1", "logged", None)
