"""The rules the lessons share: their devices held to their caps, and a batch split evenly over them."""

from __future__ import annotations

from placement_cli.devices import ChosenDevices, DeviceName
from placement_cli.exceptions import DeviceSpecError, UsageProblem
from placement_cli.i18n import _, translated
from placement_cli.lessons.caps import LESSON_DEVICES, MAX_CPUS


def check_even(batch: int, parts: int, unit: str, why: str) -> None:
    """UsageProblem (exit 2) naming the nearest batches that split evenly, unless ``batch`` does."""
    if batch % parts:
        below, above = batch - batch % parts, batch - batch % parts + parts
        hint = f"--batch {above}" if not below else f"--batch {below} or --batch {above}"
        raise UsageProblem(f"--batch {batch} does not split evenly over {parts} {unit} "
                           f"({batch} = {parts} x {batch // parts} + {batch % parts}): {why}. Use {hint}.")


def training_devices(lesson: str, count: int | None, devices: ChosenDevices | None, gpus: ChosenDevices | None,
                     cpus: int | None, default: int, first_cpu: int) -> tuple[list[str], int | None]:
    """The towers' (or replicas') devices and the logical CPUs to make: --devices, --gpus, or
    ``default`` logical CPUs from /cpu:``first_cpu`` on; every count held to the lesson's caps."""
    unit = LESSON_DEVICES[lesson][1]
    if devices and gpus:
        raise UsageProblem("give --devices or --gpus, not both")
    given = devices or gpus
    if given is not None:
        if count is not None and count != len(given.names):
            raise UsageProblem(f"{count} {unit} asked for but {len(given.names)} devices given: give one device per "
                               f"{unit.rstrip('s')}")
        # the logical CPUs the devices name, unless --cpus says
        return list(given.names), lesson_devices(lesson, given, cpus, derive_cpus=True)
    count = default if count is None else count
    chosen = ChosenDevices(tuple(DeviceName(f"/cpu:{first_cpu + i}") for i in range(count)),
                           "--towers" if lesson == "train" else "--replicas")
    return list(chosen.names), lesson_devices(lesson, chosen, first_cpu + count if cpus is None else cpus,
                                              derive_cpus=False)


def lesson_devices(lesson: str, chosen: ChosenDevices, cpus: int | None, *, derive_cpus: bool) -> int | None:
    """The caps of LESSON_DEVICES and MAX_CPUS for the ``chosen`` devices; the logical CPUs to make:
    ``cpus`` as given, or with ``derive_cpus`` (and no --cpus) as many as the highest /cpu:K of the
    devices needs. DeviceSpecError (exit 2) for a count beyond a cap."""
    devices, option = chosen.names, chosen.option
    cap, unit, why = LESSON_DEVICES[lesson]
    unit, why = translated(unit), translated(why)
    if len(devices) > cap:
        raise DeviceSpecError(_("{count} {unit} asked for with {option}: {lesson} runs at most {cap} {unit} "
                                "({why})").format(count=len(devices), unit=unit, option=option, lesson=lesson,
                                                  cap=cap, why=why))
    if cpus is not None and not 1 <= cpus <= MAX_CPUS:
        raise DeviceSpecError(_("{count} logical CPUs for {count_devices} {unit}: placement makes 1 to {cap} "
                                "(--cpus)").format(count=cpus, count_devices=len(devices), unit=unit, cap=MAX_CPUS))
    if cpus is not None or not derive_cpus:
        return cpus
    highest = max((s.device_index for s in (d.spec for d in devices) if s is not None
                   and s.device_type == "CPU" and s.device_index is not None and s.job in (None, "localhost")),
                  default=0)
    if highest >= MAX_CPUS:
        raise DeviceSpecError(_("/cpu:{index} in {option} would need {count} logical CPUs: placement makes at most "
                                "{cap} (/cpu:0../cpu:{last}, --cpus takes 1 to {cap})").format(
            index=highest, option=option, count=highest + 1, cap=MAX_CPUS, last=MAX_CPUS - 1))
    return highest + 1 if highest > 0 else None
