"""Device-name parsing and normalising."""

import pytest

from placement_cli.devices import DeviceSpec, DeviceSpecError, parse_device, short_name


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


def test_partial_request_is_satisfied_by_full_name() -> None:
    full = parse_device("/job:localhost/replica:0/task:0/device:GPU:2")
    assert parse_device("/gpu:2").satisfied_by(full)
    assert not parse_device("/gpu:3").satisfied_by(full)
    assert not parse_device("/cpu:2").satisfied_by(full)
    assert parse_device("/job:localhost").satisfied_by(full)
    assert not parse_device("/job:ps").satisfied_by(full)
    assert DeviceSpec().satisfied_by(full)
