"""Eager runtime lines: ``Executing op X in device D`` and remote ``Executing op X on task D``."""

from placement_cli.logparse.placer import DEVICE

PATTERN = rb"Executing op (\S++) (?:in device|on task) (" + DEVICE + rb")[ \t\r]*+$"
