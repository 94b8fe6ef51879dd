"""How many devices a lesson may make or use (light: the CLI's options read it at import; lessons/split.py
holds a run's devices to it)."""

from __future__ import annotations

from placement_cli.i18n import N_

# How many devices a run may make or use: one table for every option that asks for them (--cpus,
# --virtual-gpus; --devices, --gpus, --towers, --replicas; the logical CPUs that --devices /cpu:K
# implies), checked before TensorFlow starts, each refusal a usage error (exit 2) saying why.
# TensorFlow itself checks none of it: /cpu:20000 made 20,001 logical CPUs (750 MB), /cpu:1000000
# crashed it. A single device (--device, --inputs-on, --reduce-on) makes nothing: one that does not
# exist is the guide's lesson, and TensorFlow says so.
MAX_CPUS = 64  # logical CPUs: /cpu:0../cpu:63
MAX_VIRTUAL_GPUS = 16  # logical GPUs carved out of one physical GPU
# lesson -> (the most devices it runs, what it calls them, why the bound is there)
LESSON_DEVICES = {
    "tower": (64, N_("towers"), N_("one matmul per tower")),
    "train": (32, N_("towers"), N_("one logical device and about 60 ops per tower")),
    "mirrored": (16, N_("replicas"), N_("one logical device per replica")),
}
MAX_TOWERS = max(cap for cap, _unit, _why in LESSON_DEVICES.values())  # what a device list may hold at all
