"""Rich rendering of `placement devices`."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from placement_cli.i18n import _
from placement_cli.model import Inventory
from placement_cli.render.table import literal


def render_inventory(found: Inventory, *, hints: bool = True) -> Group:
    """The devices found; ``hints``: say which of the devices command's options run GPU lessons here
    (the demo, which takes none of them and says what stands in for GPUs itself, passes False)."""
    physical = Table(title=_("Physical devices"), title_justify="left")
    for column in (_("type"), _("name"), "GPU", _("compute capability")):
        physical.add_column(column)
    for d in found.physical:
        physical.add_row(literal(d.device_type), literal(d.name), literal(d.gpu_name), literal(d.compute_capability))
    logical = Table(title=_("Logical devices (what tf.device() can name)"), title_justify="left")
    logical.add_column(_("type"))
    logical.add_column(_("name"))
    logical.add_column(_("full name"))
    for device in found.logical:
        logical.add_row(literal(device.device_type), literal(device.name), literal(device.canonical))
    parts: list[Any] = [physical, logical]
    if found.device_mapping:
        mapping = Table(title=_("Device mapping (logged by a Session)"), title_justify="left")
        mapping.add_column(_("device"))
        mapping.add_column(_("description"))
        for m in found.device_mapping:
            mapping.add_row(literal(m.device), literal(m.description))
        parts.append(mapping)
    elif found.mapping_logged:
        parts.append(Text(_("Device mapping: no known devices (a CPU has no description).")))
    if hints and not found.gpus:
        parts.append(Text(_("No GPU here: run the GPU lessons with --soft, or on logical CPUs with --cpus N."),
                          style="italic"))
    return Group(*parts)
