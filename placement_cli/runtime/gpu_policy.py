"""How the TensorFlow processes placement starts share a GPU, and which GPUs each task of `trace
--cluster` sees. Pure functions of the environment: no TensorFlow here.

Each TensorFlow process reserves nearly all of a GPU's memory when it makes its GPU device
(``notes/gpu.md``: 140,829 MB of an H200), so a second process on that GPU finds none. TensorFlow's
remedies, each applied here:

- memory growth: ``ConfigProto.gpu_options.allow_growth`` (a Session's or a server's) or
  ``TF_FORCE_GPU_ALLOW_GROWTH=true`` (every allocator of the process; TensorFlow lets this variable
  win over the ConfigProto: ``true`` or ``false`` decides, any other value is ignored);
- a share each: ``gpu_options.per_process_gpu_memory_fraction``;
- no GPU at all for a task that needs none (a ps task, inspect's child): ``CUDA_VISIBLE_DEVICES=""``;
- one GPU per task: ``CUDA_VISIBLE_DEVICES`` set per task, as multi-worker launchers do.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

from placement_cli.i18n import _
from placement_cli.model import GpuMemory, Report

GROWTH, SHARE, WHOLE = "growth", "share", "whole"
POLICIES = (GROWTH, SHARE, WHOLE)
DEFAULT = GROWTH  # works for any number of processes on one GPU, as long as what they use fits
ALLOW_GROWTH = "TF_FORCE_GPU_ALLOW_GROWTH"
VISIBLE = "CUDA_VISIBLE_DEVICES"
SHARED = 0.9  # of a GPU's memory split among the tasks on it (the rest: CUDA contexts, cuBLAS/cuDNN workspaces)


def _decided(value: str | None) -> bool | None:
    """What TensorFlow makes of a TF_FORCE_GPU_ALLOW_GROWTH value: True, False, or None (not set, or a
    value it ignores: then the ConfigProto decides)."""
    if value is None:
        return None
    return {"true": True, "false": False}.get(value)


def decide(policy: str, environ: Mapping[str, str], *, gpu_tasks: int, ps_on_gpu: bool) -> GpuMemory:
    """The memory policy of a cluster of ``gpu_tasks`` processes that may see the GPU. A
    TF_FORCE_GPU_ALLOW_GROWTH the user set is kept as it is, and wins where TensorFlow lets it."""
    if policy not in POLICIES:
        raise ValueError(f"unknown GPU memory policy {policy!r}")
    yours = environ.get(ALLOW_GROWTH)
    env_says = _decided(yours)
    growth = env_says if env_says is not None else policy == GROWTH
    fraction = round(SHARED / max(1, gpu_tasks), 3) if policy == SHARE else None
    return GpuMemory(policy=policy, allow_growth=growth, memory_fraction=fraction,
                     your_allow_growth=yours, ps_on_gpu=ps_on_gpu)


def task_environment(memory: GpuMemory, job: str) -> dict[str, str]:
    """What a task's environment gets (on top of the CLI's): growth switched on where the policy asks
    and the user has not said; no GPU for a ps task kept off it."""
    env: dict[str, str] = {}
    # TF2's coordinator (the chief) makes its GPU device eagerly, where no ConfigProto reaches: it grows under share too
    grows = memory.policy == GROWTH or (memory.policy == SHARE and job == "chief")
    if grows and memory.your_allow_growth is None:
        env[ALLOW_GROWTH] = "true"
    if job == "ps" and not memory.ps_on_gpu:
        env[VISIBLE] = ""
    return env


def gpu_options(memory: GpuMemory, job: str) -> dict[str, Any]:
    """The task's ``ConfigProto`` fields for its server and sessions: ``gpu_options`` and, for a ps
    kept off the GPU, ``device_count``."""
    options: dict[str, Any] = {}
    if memory.policy == GROWTH:
        options["allow_growth"] = True
    if memory.memory_fraction is not None:
        options["per_process_gpu_memory_fraction"] = memory.memory_fraction
    found: dict[str, Any] = {"gpu_options": options} if options else {}
    if job == "ps" and not memory.ps_on_gpu:
        found["device_count"] = {"GPU": 0}
    return found


def apply(config: Any, fields: dict[str, Any]) -> Any:
    """Set ``gpu_options`` fields on a ConfigProto, as gpu_options() gives them."""
    for name, value in fields.get("gpu_options", {}).items():
        setattr(config.gpu_options, name, value)
    for device, count in fields.get("device_count", {}).items():
        config.device_count[device] = count
    return config


def no_gpu(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment of a helper process that needs no GPU (inspect's child): it sees none, so it
    takes none of a GPU the cluster it asks about is using."""
    return {**environ, VISIBLE: ""}


# ---------------------------------------------------------------- trace --cluster --split-gpus


def present(environ: Mapping[str, str] | None = None, *, proc: str = "/proc/driver/nvidia/gpus") -> list[str]:
    """The GPUs to split among the tasks, as CUDA_VISIBLE_DEVICES entries: the user's
    CUDA_VISIBLE_DEVICES when set (empty: none), else one index per NVIDIA GPU the driver lists
    (/proc/driver/nvidia/gpus, else ``nvidia-smi -L``); no GPU found: []. Imports no TensorFlow."""
    environ = os.environ if environ is None else environ
    if VISIBLE in environ:
        return parse_list(environ[VISIBLE])
    try:
        count = len([entry for entry in os.listdir(proc) if not entry.startswith(".")])
    except OSError:
        count = 0
    if not count:
        try:
            listed = subprocess.run(["nvidia-smi", "-L"],  # noqa: S607 - found on PATH, as a user would
                                    capture_output=True, text=True, timeout=30, check=False)
            count = len(re.findall(r"^GPU \d+", listed.stdout, re.MULTILINE)) if listed.returncode == 0 else 0
        except (OSError, subprocess.SubprocessError):
            count = 0
    return [str(i) for i in range(count)]


def parse_list(value: str) -> list[str]:
    """A CUDA_VISIBLE_DEVICES-style list (``0,1``, ``GPU-uuid,...``) as its entries; empty: none.
    CUDA stops at the first entry that is not valid: so do we, at an empty one."""
    found = []
    for entry in value.split(","):
        entry = entry.strip()
        if not entry:
            break
        found.append(entry)
    return found


def split(tasks: Sequence[tuple[str, int]], gpus: Sequence[str]) -> dict[str, str]:
    """Each task's CUDA_VISIBLE_DEVICES: none for a ps; the other tasks, in launch order, get the GPUs
    in equal contiguous blocks (4 GPUs, 2 workers: ``0,1`` and ``2,3``), or one each round-robin when
    there are fewer GPUs than tasks (then some share one); no GPU at all: every task gets none."""
    names = [f"{job}/{i}" for job, i in tasks]
    computing = [f"{job}/{i}" for job, i in tasks if job != "ps"]
    found = dict.fromkeys(names, "")
    if not gpus or not computing:
        return found
    each = max(1, len(gpus) // len(computing))
    for k, name in enumerate(computing):
        if len(gpus) >= len(computing):
            found[name] = ",".join(gpus[k * each:(k + 1) * each])
        else:
            found[name] = gpus[k % len(gpus)]
    return found


def grow_here(tf: Any, environ: Mapping[str, str] | None = None) -> bool:
    """Memory growth for this process's own GPUs (the demo, whose cluster step starts more TensorFlow
    processes on the same GPU): before its GPU devices are made; not where the user's
    TF_FORCE_GPU_ALLOW_GROWTH decides, nor on logical GPUs (their memory is already bounded). True
    where it was set."""
    environ = os.environ if environ is None else environ
    if ALLOW_GROWTH in environ:
        return False
    done = False
    for gpu in tf.config.list_physical_devices("GPU"):
        try:
            if tf.config.get_logical_device_configuration(gpu) is None:
                tf.config.experimental.set_memory_growth(gpu, True)
                done = True
        except (ValueError, RuntimeError):  # virtual devices, or devices already made: left as they are
            pass
    return done


# trace --cluster: what the tasks of one machine are told of its GPUs

def split_for_tasks(jobs: list[tuple[str, int]], gpu_list: str | None) -> tuple[dict[str, str], list[str]]:
    """--split-gpus: each task's CUDA_VISIBLE_DEVICES, and what the user should know of it."""
    gpus = parse_list(gpu_list) if gpu_list is not None else present()
    tasks = [(job, i) for job, count in jobs for i in range(count)]
    visible = split(tasks, gpus)
    computing = [name for name in visible if not name.startswith("ps/")]
    notes = []
    if not gpus:
        where = _("--gpu-list is empty") if gpu_list is not None else (
            _("CUDA_VISIBLE_DEVICES is empty") if VISIBLE in os.environ else _("the NVIDIA driver lists none"))
        notes.append(_("--split-gpus: no GPU to share out ({where}): every task gets CUDA_VISIBLE_DEVICES=\"\" "
                       "and runs on its CPU").format(where=where))
    elif len(gpus) == 1 and len(computing) > 1:
        notes.append(_("--split-gpus: {tasks} tasks and 1 GPU: they all share it ({each})").format(
            tasks=len(computing), each=", ".join(f"{name}={visible[name]}" for name in computing)))
    elif len(gpus) < len(computing):
        notes.append(_("--split-gpus: {tasks} tasks and {gpus} GPUs: one GPU each, round-robin, so some tasks share "
                       "one ({each})").format(tasks=len(computing), gpus=len(gpus),
                                              each=", ".join(f"{name}={visible[name]}" for name in computing)))
    return visible, notes


def shared_note(report: Report, tasks: int) -> list[str]:
    """What to know of a cluster traced on one machine without --split-gpus: every task saw the same GPUs."""
    gpus = sorted({p.spec.device_type + ":" + str(p.spec.device_index) for p in report.placements
                   if p.spec.device_type == "GPU"})
    if not gpus:
        return []
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    where = _(" (CUDA_VISIBLE_DEVICES={value}, as you set it)").format(value=visible) if visible is not None else ""
    return [_("the {count} tasks ran on this one machine and shared its GPUs{where}: {gpus} in each task is the "
              "same physical device").format(count=tasks, where=where, gpus=", ".join(gpus))]
