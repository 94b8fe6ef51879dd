"""Inspect where TensorFlow places every op, and why."""

from typing import Any

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """``placement_cli.capture`` loads lazily, so the CLI's start-up stays light."""
    if name == "capture":
        from placement_cli.notebook import capture  # noqa: PLC0415 - loaded when asked for: start-up stays light

        return capture
    raise AttributeError(f"module 'placement_cli' has no attribute {name!r}")
