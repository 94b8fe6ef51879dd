"""Device-name parsing and normalising."""

import re

import pytest

from placement_cli.devices import (ChosenDevices, DeviceName, DeviceSpec, DeviceSpecError, option_device, option_devices,
                                   option_gpus, parse_device, parse_option_device, parse_option_devices,
                                   parse_option_indices, short_name)
from placement_cli.lessons.caps import LESSON_DEVICES, MAX_CPUS, MAX_TOWERS
from placement_cli.lessons.split import lesson_devices


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("/job:localhost/replica:0/task:0/device:GPU:0", "/job:localhost/replica:0/task:0/device:GPU:0"),
        ("/job:localhost/replica:0/task:0/gpu:0", "/job:localhost/replica:0/task:0/device:GPU:0"),
        ("/gpu:2", "/job:localhost/replica:0/task:0/device:GPU:2"),
        ("/cpu:0", "/job:localhost/replica:0/task:0/device:CPU:0"),
        ("GPU:1", "/job:localhost/replica:0/task:0/device:GPU:1"),
        ("/device:XLA_GPU:0", "/job:localhost/replica:0/task:0/device:XLA_GPU:0"),
        ("/job:worker/replica:0/task:1/device:CPU:0", "/job:worker/replica:0/task:1/device:CPU:0"),
    ],
)
def test_canonical(text: str, canonical: str) -> None:
    assert parse_device(text).canonical == canonical


@pytest.mark.parametrize("text", ["/gpu:x", "/foo:0", "", "/job:", "/replica:a", "//gpu:0", "/device:GPU"])
def test_malformed(text: str) -> None:
    with pytest.raises(DeviceSpecError):
        parse_device(text)


def test_short_names() -> None:
    assert short_name("/job:localhost/replica:0/task:0/device:CPU:0") == "CPU:0"
    assert short_name("/job:ps/replica:0/task:0/device:CPU:0") == "ps/0 CPU:0"
    assert short_name("/device:GPU:1") == "GPU:1"
    # an aggregate's key is read as a logged name, once: a pluggable type as tables name it, nonsense as it is
    assert short_name("/job:localhost/replica:0/task:0/device:_CUSTOM:0") == "_CUSTOM:0"
    assert short_name("not a device") == "not a device"


def test_partial_request_is_satisfied_by_full_name() -> None:
    full = parse_device("/job:localhost/replica:0/task:0/device:GPU:2")
    assert parse_device("/gpu:2").satisfied_by(full)
    assert not parse_device("/gpu:3").satisfied_by(full)
    assert not parse_device("/cpu:2").satisfied_by(full)
    assert parse_device("/job:localhost").satisfied_by(full)
    assert not parse_device("/job:ps").satisfied_by(full)
    assert DeviceSpec().satisfied_by(full)


# What a user may type in a run command's options: TensorFlow's grammar, checked before any run.

@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("/gpu:2", "/job:localhost/replica:0/task:0/device:GPU:2"),
        ("  /cpu:0 ", "/job:localhost/replica:0/task:0/device:CPU:0"),
        ("/job:ps/task:3/cpu:0", "/job:ps/replica:0/task:3/device:CPU:0"),
        ("/job:worker_1/replica:0/task:1/device:GPU:0", "/job:worker_1/replica:0/task:1/device:GPU:0"),
        ("/device:XLA_CPU:0", "/job:localhost/replica:0/task:0/device:XLA_CPU:0"),
        ("/CPU:0", "/job:localhost/replica:0/task:0/device:CPU:0"),
        ("/cpu:2147483647", "/job:localhost/replica:0/task:0/device:CPU:2147483647"),
    ],
)
def test_option_devices_tensorflow_accepts(text: str, canonical: str) -> None:
    assert parse_option_device(text).canonical == canonical


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("/gpu:99999999999999999999", "too large"),  # TF: Malformed device specification
        ("/cpu:2147483648", "too large"),  # TF would wrap it to another device (4294967296 runs on CPU:0)
        ("/task:99999999999999999999", "too large"),
        ("/job:a b/cpu:0", "' '"),
        ("/job:a-b/cpu:0", "job name"),
        ("/job:1a/cpu:0", "job name"),
        ("/job:*/cpu:0", "job name"),
        ("/cpu:0/gpu:0", "more than one device type"),  # TF: ValueError, once an internal error here
        ("/cpu:0/cpu:0", "more than one device type"),
        ("/job:a/job:b", "more than one job"),
        ("/JOB:ps/cpu:0", "lower case"),
        ("/device:_CUSTOM:0", "device type"),  # fine in a log, but TF cannot parse it as a request
        ("/gpu:\u0663", "ASCII"),  # an Arabic-Indic three: a digit to Python, not to TensorFlow
        ("/gpu:\u00b2", "ASCII"),
        ("/gpu:0\x1b[31m", "ASCII"),
        ("/cpu:0/", "empty component"),
        ("/foo:0", "unknown component"),
        ("", "empty"),
    ],
)
def test_option_devices_tensorflow_rejects_or_misreads(text: str, says: str) -> None:
    with pytest.raises(DeviceSpecError, match=re.escape(says)):
        parse_option_device(text)


def test_option_device_messages_stay_one_short_line() -> None:
    with pytest.raises(DeviceSpecError) as caught:
        parse_option_device("/gpu:" + "9" * 5000)
    assert len(str(caught.value)) < 200 and "\n" not in str(caught.value)


def test_option_device_lists_compare_full_names() -> None:
    assert [s.short for s in parse_option_devices("/cpu:1, /cpu:2", MAX_TOWERS)] == ["CPU:1", "CPU:2"]
    for same in ("/cpu:0,/CPU:0", "/cpu:0,/device:CPU:0", "/gpu:1,/job:localhost/replica:0/gpu:1"):
        with pytest.raises(DeviceSpecError, match="same device"):
            parse_option_devices(same, MAX_TOWERS)
    with pytest.raises(DeviceSpecError, match=f"at most {MAX_TOWERS}"):
        parse_option_devices(",".join(f"/cpu:{i}" for i in range(MAX_TOWERS + 1)), MAX_TOWERS)


@pytest.mark.parametrize(
    ("text", "says"),
    [("0-10000000", "at most 64"), ("0-64", "at most 64"), ("0-40,41-70", "at most 64"),
     ("99999999999999999999", "too large"), ("9" * 5000, "too large"), ("x", "bad GPU index"),
     ("-1", "bad GPU index"), ("", "bad GPU index"), ("\u00b2", "bad GPU index"), ("3-1", "empty range"),
     ("2,2", "duplicate")],
)
def test_gpu_index_lists_are_capped_and_checked_before_anything_is_built(text: str, says: str) -> None:
    with pytest.raises(DeviceSpecError, match=re.escape(says)):
        parse_option_indices(text, MAX_TOWERS)


def test_gpu_index_lists() -> None:
    assert parse_option_indices("2,3", MAX_TOWERS) == [2, 3]
    assert parse_option_indices("0-3, 6", MAX_TOWERS) == [0, 1, 2, 3, 6]
    assert len(parse_option_indices("0-63", MAX_TOWERS)) == MAX_TOWERS


@pytest.mark.parametrize("text, canonical", [
    ("/gpu", "/job:localhost/replica:0/task:0/device:GPU:*"),
    ("cpu", "/job:localhost/replica:0/task:0/device:CPU:*"),
    ("/job:ps/cpu", "/job:ps/replica:0/task:0/device:CPU:*"),
])
def test_a_device_type_without_an_index_means_any_such_device_as_tensorflow_reads_it(text: str, canonical: str) -> None:
    assert parse_option_device(text).canonical == canonical == parse_device(text).canonical


@pytest.mark.parametrize("text", ["/gpu/cpu", "/device:GPU", "/replica:\u00b2", "/cpu:\u00b2"])
def test_still_refused(text: str) -> None:
    with pytest.raises(DeviceSpecError):
        parse_option_device(text)
    with pytest.raises(DeviceSpecError):
        parse_device(text)


def _chosen(names: list[str], option: str) -> ChosenDevices:
    return ChosenDevices(tuple(map(DeviceName, names)), option)


def test_lesson_devices_caps_counts_and_the_logical_cpus_devices_imply() -> None:
    cpus = [f"/cpu:{i}" for i in range(20)]
    for lesson, (cap, unit, _) in LESSON_DEVICES.items():
        assert lesson_devices(lesson, _chosen(cpus[:min(cap, 20)], "--devices"), None, derive_cpus=True) == min(cap, 20)
        with pytest.raises(DeviceSpecError, match=f"{cap + 1} {unit} asked for with --gpus: {lesson} runs at most {cap}"):
            lesson_devices(lesson, _chosen([f"/gpu:{i}" for i in range(cap + 1)], "--gpus"), None, derive_cpus=True)
    assert lesson_devices("train", _chosen(["/cpu:1", f"/cpu:{MAX_CPUS - 1}"], "--devices"), None, derive_cpus=True) == MAX_CPUS
    for far in (MAX_CPUS, 20_000, 1_000_000, 2**31 - 1):
        with pytest.raises(DeviceSpecError, match=f"/cpu:{far} in --devices would need {far + 1} logical CPUs"):
            lesson_devices("mirrored", _chosen(["/cpu:0", f"/job:localhost/cpu:{far}"], "--devices"), None, derive_cpus=True)
    assert lesson_devices("train", _chosen(["/cpu:1", "/cpu:20000"], "--devices"), 3, derive_cpus=True) == 3  # --cpus says
    assert lesson_devices("train", _chosen(["/job:ps/cpu:70"], "--devices"), None, derive_cpus=True) is None  # not this machine's
    assert lesson_devices("mirrored", _chosen(["/gpu:0", "/gpu:1"], "--gpus"), None, derive_cpus=True) is None
    assert lesson_devices("tower", _chosen(["/cpu:1", "/cpu:20000"], "--devices"), None, derive_cpus=False) is None
    with pytest.raises(DeviceSpecError, match="placement makes 1 to 64"):
        lesson_devices("train", _chosen(["/cpu:1"], "--towers"), 65, derive_cpus=False)


def test_a_device_name_is_read_once_where_it_enters_the_model_and_keeps_its_spelling() -> None:
    """The model's device fields hold DeviceNames: the name as written (JSON, comparisons), read once
    (``spec``, ``short``); a plain string given to a model type is read there, a name that is no
    device stands as written, and a name survives pickling (the parallel parser, a run's child)."""
    import pickle

    from placement_cli.devices import DeviceName
    from placement_cli.model import Copy, DeviceMapping, PlacementFailure
    from placement_cli.model.kinds import FailureKind

    name = DeviceName("/job:ps/task:1/gpu:0")
    assert name == "/job:ps/task:1/gpu:0" and name.short == "ps/1 GPU:0" and name.task_key == ("ps", 0, 1)
    assert DeviceName(name) is name and pickle.loads(pickle.dumps(name)).short == "ps/1 GPU:0"
    odd = DeviceName("not a [device]")
    assert odd.spec is None and odd.short == "not a [device]" and odd.task_key is None
    copy = Copy(tensor="x:0", source="/job:localhost/replica:0/task:0/device:CPU:0", target="/gpu:1")
    assert (type(copy.source), copy.source.short, copy.target.short) == (DeviceName, "CPU:0", "GPU:1")
    assert copy.to_dict()["to"] == "/gpu:1"  # as written
    failure = PlacementFailure(FailureKind.DEVICE_NOT_FOUND, "a", "/device:GPU:3", "m", ("/cpu:0",), "/gpu:2")
    assert [d.short for d in (failure.requested_device, *failure.available_devices, failure.group_device)] \
        == ["GPU:3", "CPU:0", "GPU:2"]
    assert PlacementFailure.from_dict(failure.to_dict()) == failure
    assert DeviceMapping("/job:localhost/replica:0/task:0/device:GPU:0", "H200").device.short == "GPU:0"


def test_a_duplicate_device_is_named_whole_the_first_given_first() -> None:
    full = "/job:localhost/replica:0/task:0/device:CPU:0"
    with pytest.raises(DeviceSpecError) as caught:
        parse_option_devices(f"{full},/cpu:0", MAX_TOWERS)
    assert str(caught.value).startswith(f"'{full}' and '/cpu:0' are the same device")


def test_an_option_is_read_once_into_what_the_command_takes() -> None:
    """--gpus, --devices, --device: read by their parsers into DeviceNames (spec read once), spelt as
    TensorFlow reads them, with the option they came from; the lessons read them no more."""
    chosen = option_gpus("0-2", MAX_TOWERS)
    assert chosen.names == ("/gpu:0", "/gpu:1", "/gpu:2") and chosen.option == "--gpus" and str(chosen) == "0-2"
    assert [n.spec.short for n in chosen.names if n.spec] == ["GPU:0", "GPU:1", "GPU:2"]
    listed = option_devices(" /xla_cpu:0,/cpu:1", MAX_TOWERS)
    assert listed.names == ("/device:XLA_CPU:0", "/cpu:1") and listed.option == "--devices"
    one = option_device(" /cpu:0 ")
    assert one == "/cpu:0" and isinstance(one, DeviceName) and one.short == "CPU:0"
    with pytest.raises(DeviceSpecError, match="unknown component"):
        option_device("/foo:0")


def test_a_request_is_read_by_tensorflow_s_request_grammar_a_logged_name_by_its_log_s() -> None:
    """NodeFacts and Span hold DeviceNames: ``spec`` reads a name as TensorFlow's log writes it (any
    type, a pluggable _CUSTOM), ``request`` as tf.device reads a request (no such type)."""
    from placement_cli.model.facts import NodeFacts, Span

    custom = DeviceName("/device:_CUSTOM:0")
    assert custom.spec is not None and custom.spec.device_type == "_CUSTOM" and custom.request is None
    node = NodeFacts("m", "MatMul", requested="/gpu:1")  # a plain string is read where the model is made
    assert type(node.requested) is DeviceName and node.requested.request == parse_device("/gpu:1")
    assert type(Span(1, 2, "/cpu:0").requested) is DeviceName and Span(1, 2, None).requested is None
