"""`placement errors`: placement failures, each run for real, with and without soft placement."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from placement_cli.devices import DeviceName
from placement_cli.i18n import N_, Message
from placement_cli.lessons.guide import A_VALUES, string_graph
from placement_cli.logparse import parse_text
from placement_cli.logparse.causes import cause, essential, headline
from placement_cli.logparse.error_messages import failure_from_text
from placement_cli.model import FailureCase, FailureCatalogue, PlacementFailure, SoftRun
from placement_cli.model.facts import Facts
from placement_cli.model.kinds import FailureKind
from placement_cli.runtime import private, startup
from placement_cli.runtime.capture.fdcapture import capture_fds
from placement_cli.runtime.facts import graph_nodes, kernel_checks, kernel_map
from placement_cli.runtime.run import plain
from placement_cli.runtime.startup import (
    XLA_SWITCH,
    RunOptions,
    available_devices,
    session_config,
    xla_devices,
    xla_missing,
)
from placement_cli.why import explain, merge_nodes

# Every case runs in this one process: one TensorFlow start-up for the whole catalogue, XLA devices on
# only where no GPU exists (the no-kernel case's stand-in for a GPU; the other cases run as they would
# without them, but the lists of the devices that exist name them too).
_CPUS = 2
_OPTIONS = RunOptions(cpus=_CPUS, xla=True)  # where no GPU exists


def options(physical: Collection[str]) -> RunOptions:
    """The catalogue's start-up, chosen from the types of the physical devices TensorFlow found: XLA
    devices only where no GPU exists (beside a GPU every case's device list would name XLA_CPU:0 and
    XLA_GPU:0, and an XLA_GPU device takes GPU memory of its own; the no-kernel case runs on the GPU)."""
    return _OPTIONS if "GPU" not in physical else RunOptions(cpus=_CPUS)


class CaseUnavailable(Exception):
    """This TensorFlow cannot build the case (a private API it needs is missing): reported, not run."""


@dataclass(frozen=True)
class Case:
    name: str
    description: Message
    requested: str
    build: Callable[[Any], Any]  # tf -> fetch, built inside a fresh default graph
    needs_gpu: bool = False


def _matmul_on(device: str) -> Callable[[Any], Any]:
    def build(tf: Any) -> Any:
        with tf.device(device):
            a = tf.constant(A_VALUES, shape=[2, 3], name="a")
            b = tf.constant(A_VALUES, shape=[3, 2], name="b")
            return tf.matmul(a, b)

    return build


def _string_on_gpu(tf: Any) -> Any:
    with tf.device("/gpu:0"):
        return tf.strings.join([tf.constant("place"), tf.constant("ment")], name="Join")


def _string_on_xla(tf: Any) -> Any:
    return string_graph(tf, XLA_CPU)


def _colocation(tf: Any) -> Any:
    with tf.device("/cpu:0"):
        a = tf.constant(A_VALUES, shape=[2, 3], name="a")
    with tf.compat.v1.colocate_with(a.op):
        b = tf.identity(a, name="b")
    if not private.set_device(b.op, "/device:CPU:1"):  # a pin that contradicts the colocation
        raise CaseUnavailable("cannot build this case in this TensorFlow: "
                              f"{private.APIS['set_device']} ({private.unavailable().get('set_device', 'missing')})")
    return b


# The cases' words as messages: English in JSON, the chosen language in tables.
NEEDS_SECOND_TYPE = Message(N_("needs a GPU or TensorFlow's XLA_CPU device: no GPU here, and this TensorFlow makes no "
                               "XLA devices (even with TF_XLA_FLAGS={switch}), so this case cannot be run here"),
                            switch=XLA_SWITCH)
NEEDS_XLA_AT_START = Message(N_("needs a GPU or TensorFlow's XLA_CPU device: no GPU here, and TensorFlow was already "
                                "running in this process without its XLA devices (TF_XLA_FLAGS={switch} counts "
                                "only when it starts), so this case cannot be run here"), switch=XLA_SWITCH)
XLA_CPU = "/device:XLA_CPU:0"
# Where no GPU exists, the no-kernel case runs on TensorFlow's XLA_CPU device, a second device type
# with a kernel registry of its own (no string ops): the same error and the same fallback, for real.
NO_KERNEL_ON_XLA = Case("no-gpu-kernel", Message(N_("A string op (AsString) pinned to XLA_CPU:0, standing in for a "
                                                    "GPU (none here): it has no XLA_CPU kernel")),
                        XLA_CPU, _string_on_xla)
CASES = (
    Case("missing-gpu", Message(N_("MatMul pinned to a GPU this machine does not have (the guide's /gpu:2)")),
         "/gpu:2", _matmul_on("/gpu:2")),
    Case("cpu-out-of-range", Message(N_("MatMul pinned to /cpu:7 when the session has {cpus} CPU devices"), cpus=_CPUS),
         "/cpu:7", _matmul_on("/cpu:7")),
    Case("no-gpu-kernel", Message(N_("A string op (StringJoin) pinned to a GPU: it has no GPU kernel")), "/gpu:0",
         _string_on_gpu, needs_gpu=True),
    Case("colocation-conflict", Message(N_("b = identity(a) colocated with a on CPU:0, but pinned to CPU:1")),
         "/cpu:1", _colocation),
    Case("malformed-gpu-index", Message(N_("A device string whose index is not a number")), "/gpu:x",
         _matmul_on("/gpu:x")),
    Case("malformed-device-type", Message(N_("A device string with an unknown component")), "/foo:0",
         _matmul_on("/foo:0")),
)


def _run(tf: Any, case: Case, soft: bool) -> tuple[Any, str | None, str | None, str, Any]:
    """(result, error class, error message, captured log, graph) of one case."""
    options = RunOptions(soft=soft, cpus=_CPUS)
    graph = tf.Graph()
    with capture_fds() as cap:
        try:
            with graph.as_default():
                fetch = case.build(tf)
            with tf.compat.v1.Session(graph=graph, config=session_config(tf, options)) as sess:
                value = sess.run(fetch)
            result = plain(value)
            error_class = message = None
        except (tf.errors.OpError, ValueError) as exc:
            result, error_class = None, type(exc).__name__
            message = getattr(exc, "message", None) or str(exc)
    return result, error_class, message, cap.text, graph


def _failure(message: str, error_class: str | None, requested: str) -> PlacementFailure:
    """The parsed error; else TensorFlow's own message: a ValueError is tf.device refusing the
    string (no op was made yet), anything else a run that failed in a wording not known here."""
    parsed = failure_from_text(message)
    if parsed is not None:
        return parsed
    kind = FailureKind.INVALID_DEVICE_SPEC if error_class == "ValueError" else FailureKind.RUN_FAILED
    said = essential(message)
    return PlacementFailure(kind=kind, node=None, requested_device=DeviceName(requested), message=said,
                            cause=cause(message) if kind == FailureKind.RUN_FAILED else None, headline=headline(said))


def _case(tf: Any, case: Case, have_gpu: bool, devices: tuple[str, ...], kernels: Any, check: Any) -> FailureCase:
    """Run one case without soft placement, then with it; or say why it cannot run here."""
    if case.needs_gpu and not have_gpu:
        if not xla_devices(tf):
            why = NEEDS_SECOND_TYPE if xla_missing(_OPTIONS) == "dropped" else NEEDS_XLA_AT_START
            return FailureCase(case.name, case.description, case.requested, skip_reason=why)
        case = NO_KERNEL_ON_XLA  # the same lesson on the second device type there is
    try:
        _, error_class, message, _, _ = _run(tf, case, soft=False)
    except CaseUnavailable as exc:
        return FailureCase(case.name, case.description, case.requested, skip_reason=str(exc))
    error = None
    if message is not None:
        error = _failure(message, error_class, case.requested)
        if not error.available_devices:
            error = PlacementFailure(error.kind, error.node, error.requested_device, error.message,
                                     tuple(map(DeviceName, devices)) if error_class != "ValueError" else (),
                                     headline=error.headline)
    result, soft_class, soft_message, log, graph = _run(tf, case, soft=True)
    if soft_message is None:
        facts = Facts(nodes=merge_nodes(graph_nodes(graph.get_operations(), kernels, check)), available=devices,
                      kernels=kernels, complete=True)
        soft = SoftRun(tuple(explain(parse_text(log).placements, facts)), result)
    else:
        soft = SoftRun(error_class=soft_class, message=(essential(soft_message).splitlines() or [""])[0])
    return FailureCase(case.name, case.description, case.requested, ran=True,
                       error_class=error_class, error=error, soft=soft)


def catalogue() -> FailureCatalogue:
    """Run every case and report what happened: those that need a GPU on TensorFlow's XLA_CPU device
    where there is none (its XLA devices on, for the one start-up all the cases share)."""
    private.forget()
    with capture_fds():
        tf = startup.tensorflow(options(startup.physical_devices()))
        have_gpu = bool(tf.config.list_physical_devices("GPU"))
        kernels, devices = kernel_map(), available_devices(tf)  # XLA's service logs when first asked
    check = kernel_checks(devices)
    cases = tuple(_case(tf, case, have_gpu, devices, kernels, check) for case in CASES)
    return FailureCatalogue(cases, tuple(private.missing_facts()))
