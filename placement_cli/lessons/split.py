"""The one rule both training lessons share: a batch split evenly over the devices."""

from __future__ import annotations

from placement_cli.exceptions import UsageProblem


def check_even(batch: int, parts: int, unit: str, why: str) -> None:
    """UsageProblem (exit 2) naming the nearest batches that split evenly, unless ``batch`` does."""
    if batch % parts:
        below, above = batch - batch % parts, batch - batch % parts + parts
        hint = f"--batch {above}" if not below else f"--batch {below} or --batch {above}"
        raise UsageProblem(f"--batch {batch} does not split evenly over {parts} {unit} "
                           f"({batch} = {parts} x {batch // parts} + {batch % parts}): {why}. Use {hint}.")
