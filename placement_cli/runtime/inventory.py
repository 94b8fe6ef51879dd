"""What devices TensorFlow sees, physical and logical, and the Device mapping a Session logs."""

from __future__ import annotations

from typing import Any

from placement_cli.devices import try_parse
from placement_cli.logparse import parse_text
from placement_cli.model import Inventory, LogicalDevice, PhysicalDevice
from placement_cli.runtime import startup
from placement_cli.runtime.capture.fdcapture import capture_fds
from placement_cli.runtime.startup import RunOptions, session_config


def _physical(tf: Any, device: Any) -> PhysicalDevice:
    if device.device_type != "GPU":
        return PhysicalDevice(device.name, device.device_type)
    details = tf.config.experimental.get_device_details(device)
    capability = details.get("compute_capability")
    return PhysicalDevice(device.name, device.device_type, details.get("device_name"),
                          ".".join(map(str, capability)) if capability else None)


def inventory(options: RunOptions) -> Inventory:
    """Physical and logical devices, and the mapping a v1 Session prints when created."""
    with capture_fds() as cap:
        tf = startup.tensorflow(options)  # through the module: a test's batch replaces it
        physical = tuple(_physical(tf, d) for d in tf.config.list_physical_devices())
        logical = []
        for d in tf.config.list_logical_devices():
            spec = try_parse(d.name)
            logical.append(LogicalDevice(d.name, d.device_type, spec.canonical if spec else d.name))
        with tf.compat.v1.Session(graph=tf.Graph(), config=session_config(tf, options)):
            pass
    report = parse_text(cap.text)
    return Inventory(physical, tuple(logical), report.device_mapping, report.mapping_seen)
