"""Eager runtime lines: ``Executing op X in device D`` and remote ``Executing op X on task D``."""

from placement_cli.logparse.placer import DEVICE, OP

START = b"Executing op "  # what every eager line begins with

PATTERN = START + rb"(" + OP + rb") (?:in device|on task) (" + DEVICE + rb")[ \t\r]*+$"
