"""Every wording of a failed placement TensorFlow uses is read, with its node and device.

The messages below are TensorFlow 2.21's own (produced for real, see the fixtures
tf2.21/device_spec_errors.log and tf2.21/nccl_no_kernel.log) and older ones from logs
people posted (tf1.x/no_kernel_wordings.log).
"""

from __future__ import annotations

import pytest

from conftest import LOGS
from placement_cli.devices import tf_rejects
from placement_cli.logparse import parse_paths
from placement_cli.logparse.error_messages import failure_from_text

CASES = [
    # graph mode, TF 2.21: tf.device('/gpu:99999999999999999999') and friends
    (("Malformed device specification '/device:GPU:99999999999999999999' in node: {name:'Const' id:2 op "
     "device:{requested: '/device:GPU:99999999999999999999', assigned: ''} def:{{{node Const}} = Const[]()}}"),
     "invalid_device_spec", "Const", "/device:GPU:99999999999999999999"),
    ("Malformed device specification '/job:a b/device:CPU:0' in node: {name:'Const' id:2}",
     "invalid_device_spec", "Const", "/job:a b/device:CPU:0"),
    # eager, TF 2.21
    (("Malformed device specification '/job:localhost/replica:0/task:0/device:GPU:99999999999999999999' in eager op: "
     "Name: _EagerConst\nDevice Name: []\nDevice: []\nAttrs: goo.gle/debugonly   \n\n"),
     "invalid_device_spec", None, "/job:localhost/replica:0/task:0/device:GPU:99999999999999999999"),
    ("tensorflow.python.framework.errors_impl.InvalidArgumentError: /job:ps/replica:0/task:3/device:CPU:0 unknown device.",
     "device_not_found", None, "/job:ps/replica:0/task:3/device:CPU:0"),
    ("InvalidArgumentError: /job:a b/replica:0/task:0/device:CPU:0 unknown device.",
     "invalid_device_spec", None, "/job:a b/replica:0/task:0/device:CPU:0"),
    ("/job:localhost/replica:0/task:99999999999999999999/device:CPU:0 unknown device.",
     "invalid_device_spec", None, "/job:localhost/replica:0/task:99999999999999999999/device:CPU:0"),
    # a kernel missing at run time (NCCL asked for on a CPU-only machine)
    (("No OpKernel was registered to support Op 'NcclAllReduce' used by {{node NcclAllReduce}} with these attrs: "
     "[T=DT_FLOAT, reduction=\"sum\", num_devices=1, shared_name=\"c0\"]\nRegistered devices: [CPU]\n"
     "Registered kernels:\n  device='GPU'\n\n\t [[NcclAllReduce]] [Op:__inference_all_reduce_6]"),
     "no_kernel", "NcclAllReduce", None),
    (("Could not find device for node: {{node NcclAllReduce}} = NcclAllReduce[T=DT_FLOAT, num_devices=1]\n"
     "All kernels registered for op NcclAllReduce:\n  device='GPU'\n [Op:NcclAllReduce] name: "),
     "no_kernel", "NcclAllReduce", None),
    (("Not found: No registered '_Arg' OpKernel for CPU devices compatible with node _arg_x_0_0 = "
     "_Arg[T=DT_FLOAT, index=0, _device=\"/job:localhost/replica:0/task:0/cpu:0\"]()"),
     "no_kernel", "_arg_x_0_0", "/job:localhost/replica:0/task:0/cpu:0"),
    ("ValueError: Multiple device types are not allowed while parsing the device spec: /cpu:0/gpu:0.",
     "invalid_device_spec", None, "/cpu:0/gpu:0"),
    # eager, TF 2.21: a tf.function called under tf.device('/gpu:99'), soft placement off
    (("tensorflow.python.framework.errors_impl.InvalidArgumentError: Unable to find any devices for spec "
     "/device:GPU:99 [Op:__inference_f_8]"), "device_not_found", None, "/device:GPU:99"),
    ("Unable to find any devices for spec /device:GPU:99999999999999999999 [Op:__inference_f_8]",
     "invalid_device_spec", None, "/device:GPU:99999999999999999999"),
]


@pytest.mark.parametrize(("message", "kind", "node", "requested"), CASES)
def test_wording(message: str, kind: str, node: str | None, requested: str | None) -> None:
    failure = failure_from_text(message)
    assert failure is not None
    assert (failure.kind, failure.node, failure.requested_device) == (kind, node, requested)


def test_runtime_no_kernel_keeps_its_registered_devices() -> None:
    failure = failure_from_text(CASES[6][0])
    assert failure.available_devices == ("CPU",)
    assert failure.message.splitlines()[1:] == ["Registered devices: [CPU]", "Registered kernels:", "  device='GPU'"]


def test_tensorflows_device_grammar() -> None:
    """DeviceNameUtils::ParseFullName: what TensorFlow calls malformed, whatever it says."""
    assert tf_rejects("/job:a b/replica:0/task:0/device:CPU:0")
    assert tf_rejects("/job:localhost/replica:0/task:99999999999999999999/device:CPU:0")
    assert tf_rejects("/device:_CUSTOM:0")
    assert tf_rejects("/gpu:x")
    assert not tf_rejects("/job:ps/replica:0/task:3/device:CPU:0")
    assert not tf_rejects("/job:worker_1/replica:0/task:0/device:XLA_GPU:7")


@pytest.mark.parametrize("log", ["tf2.21/device_spec_errors.log", "tf2.21/nccl_no_kernel.log"])
def test_parse_reports_what_a_failed_run_logged(log: str) -> None:
    """Before: no error at all for these logs; `parse` and `trace` said nothing went wrong."""
    report = parse_paths([str(LOGS / log)])
    assert report.errors
    for failure in report.errors:
        assert failure.kind in {"invalid_device_spec", "device_not_found", "no_kernel"}
