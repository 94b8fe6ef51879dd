"""The rules both training lessons share: their devices, and a batch split evenly over them."""

from __future__ import annotations

from placement_cli.exceptions import UsageProblem


def check_even(batch: int, parts: int, unit: str, why: str) -> None:
    """UsageProblem (exit 2) naming the nearest batches that split evenly, unless ``batch`` does."""
    if batch % parts:
        below, above = batch - batch % parts, batch - batch % parts + parts
        hint = f"--batch {above}" if not below else f"--batch {below} or --batch {above}"
        raise UsageProblem(f"--batch {batch} does not split evenly over {parts} {unit} "
                           f"({batch} = {parts} x {batch // parts} + {batch % parts}): {why}. Use {hint}.")


def training_devices(lesson: str, count: int | None, devices: str | None, gpus: str | None, cpus: int | None,
                     default: int, first_cpu: int) -> tuple[list[str], int | None]:
    """The towers' (or replicas') devices and the logical CPUs to make: --devices, --gpus, or
    ``default`` logical CPUs from /cpu:``first_cpu`` on; every count held to the lesson's caps."""
    from placement_cli.caps import LESSON_DEVICES  # noqa: PLC0415
    from placement_cli.devices import lesson_devices, parse_indices  # noqa: PLC0415

    unit = LESSON_DEVICES[lesson][1]
    if devices and gpus:
        raise UsageProblem("give --devices or --gpus, not both")
    if devices or gpus:
        chosen = devices.split(",") if devices else [f"/gpu:{i}" for i in parse_indices(gpus or "")]
        if count is not None and count != len(chosen):
            raise UsageProblem(f"{count} {unit} asked for but {len(chosen)} devices given: give one device per "
                               f"{unit.rstrip('s')}")
        # the logical CPUs the devices name, unless --cpus says
        return chosen, lesson_devices(lesson, chosen, "--devices" if devices else "--gpus", cpus, derive_cpus=True)
    count = default if count is None else count
    chosen = [f"/cpu:{first_cpu + i}" for i in range(count)]
    option = "--towers" if lesson == "train" else "--replicas"
    return chosen, lesson_devices(lesson, chosen, option, first_cpu + count if cpus is None else cpus, derive_cpus=False)
