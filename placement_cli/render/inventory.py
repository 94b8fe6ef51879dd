"""Rich rendering of `placement devices`."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from placement_cli.render.table import literal


def render_inventory(found: dict[str, Any]) -> Group:
    physical = Table(title="Physical devices", title_justify="left")
    for column in ("type", "name", "GPU", "compute capability"):
        physical.add_column(column)
    for d in found["physical"]:
        physical.add_row(literal(d["device_type"]), literal(d["name"]), literal(d.get("gpu_name")),
                         literal(d.get("compute_capability")))
    logical = Table(title="Logical devices (what tf.device() can name)", title_justify="left")
    logical.add_column("type")
    logical.add_column("name")
    logical.add_column("full name")
    for d in found["logical"]:
        logical.add_row(literal(d["device_type"]), literal(d["name"]), literal(d["canonical"]))
    parts: list[Any] = [physical, logical]
    if found["device_mapping"]:
        mapping = Table(title="Device mapping (logged by a Session)", title_justify="left")
        mapping.add_column("device")
        mapping.add_column("description")
        for m in found["device_mapping"]:
            mapping.add_row(literal(m["device"]), literal(m["description"]))
        parts.append(mapping)
    elif found["device_mapping_logged"]:
        parts.append(Text("Device mapping: no known devices (a CPU has no description)."))
    if not any(d["device_type"] == "GPU" for d in found["physical"]):
        parts.append(Text("No GPU here: run the GPU lessons with --soft, or on logical CPUs with --cpus N.",
                          style="italic"))
    return Group(*parts)
