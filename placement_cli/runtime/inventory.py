"""What devices TensorFlow sees, physical and logical, and the Device mapping a Session logs."""

from __future__ import annotations

from typing import Any

from placement_cli.runtime.fdcapture import capture_fds
from placement_cli.devices import try_parse
from placement_cli.logparse import parse_text
from placement_cli.runtime.startup import RunOptions, session_config, tensorflow


def _details(tf: Any, device: Any) -> dict[str, Any]:
    info: dict[str, Any] = {"name": device.name, "device_type": device.device_type}
    if device.device_type == "GPU":
        details = tf.config.experimental.get_device_details(device)
        capability = details.get("compute_capability")
        info["gpu_name"] = details.get("device_name")
        info["compute_capability"] = ".".join(map(str, capability)) if capability else None
    return info



def inventory(options: RunOptions) -> dict[str, Any]:
    """Physical and logical devices, and the mapping a v1 Session prints when created."""
    with capture_fds() as cap:
        tf = tensorflow(options)
        physical = [_details(tf, d) for d in tf.config.list_physical_devices()]
        logical = []
        for d in tf.config.list_logical_devices():
            spec = try_parse(d.name)
            logical.append({"name": d.name, "device_type": d.device_type,
                            "canonical": spec.canonical if spec else d.name})
        with tf.compat.v1.Session(graph=tf.Graph(), config=session_config(tf, options)):
            pass
    report = parse_text(cap.text)
    return {
        "physical": physical,
        "logical": logical,
        "device_mapping": [m.to_dict() for m in report.device_mapping],
        "device_mapping_logged": report.mapping_seen,
    }
