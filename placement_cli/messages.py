"""Reasons, titles, roles and the training lessons' texts as i18n Messages (template + fields): the
model keeps them whole, JSON writes their English, tables show them in the chosen language. Every
template is marked here, once, so every one has a catalogue entry."""

from __future__ import annotations

import math
import re

from placement_cli.i18n import N_, Message

# Why an op sits where it does (why.py; train's variable reads).
MISSING = N_("{device} does not exist (have: {names})")
NONE_LISTED = Message(N_("none listed"))
UNKNOWN = Message(N_("unknown"))
UNCHECKED = N_("unknown ({device} exists; its kernels could not be checked)")
HAS_KERNEL = N_("unknown ({device} exists and has a kernel for it)")
NO_KERNEL = N_("no {device_type} kernel registered for {op}")
NO_TYPED_KERNEL = N_("no {device_type} kernel for {op} with this node's types")
COLOCATED = N_("colocated with {partner} on {device}")
COLOCATED_KIND = N_("colocated with {partner} ({kind}) on {device}")
READ_SAME = N_("colocated with its variable {partner} (VarHandleOp) on {device}, where its tower runs too: no copy")
READ_COPY = N_("colocated with its variable {partner} (VarHandleOp) on {device}, not on its tower's device: "
               "every step copies the value there")
READ = N_("colocated with its variable {partner} (VarHandleOp) on {device}")
# TensorFlow's rule for eager ops (eager/placement_utils.cc): one that takes a resource runs where it lives.
WITH_VARIABLE = N_("with its variable {name} on {device}: TensorFlow runs an eager op that takes a resource where "
                   "the resource lives, whatever the scope")
WITH_RESOURCE_KIND = N_("with its resource ({kind}) on {device}: TensorFlow runs an eager op that takes a resource "
                        "where the resource lives, whatever the scope")
WITH_RESOURCE = N_("with its resource on {device}: TensorFlow runs an eager op that takes a resource where the "
                   "resource lives, whatever the scope")
# TensorFlow's placer (ColocateResourceOrRefEdge, TF 0.x-2.x): a node with a reference or resource input is
# put where that input already is, whatever it asked; the log says so ("Ignoring device specification ...").
WITH_REFERENCE_INPUT = N_("with its reference input {source} on {device}: TensorFlow's placer puts a node where its "
                          "reference or resource input is, whatever it asked")
WITH_VARIABLE_INPUT = N_("with its variable {name} (its resource input {source}) on {device}: TensorFlow's placer puts "
                         "a node where its reference or resource input is, whatever it asked")
# A tf.function compiled by XLA: TensorFlow logs its call, not its body.
XLA_CLUSTER = N_("compiled by XLA (jit_compile): its {count} ops ran inside one XLA cluster on {device}, which "
                 "TensorFlow does not log")
XLA_MOVED = N_("compiled by XLA (jit_compile): its {count} ops ran inside one XLA cluster on {device}, which "
               "TensorFlow does not log; asked for another device: {moved}")
COLOCATION = frozenset({COLOCATED, COLOCATED_KIND, READ_SAME, READ_COPY, READ})


def colocated(reason: object) -> bool:
    """Whether ``reason`` says the op sits with a partner it must share a device with."""
    return isinstance(reason, Message) and reason.template in COLOCATION


# The lessons' report titles.
MATMUL = N_("Guide matmul ({mode} mode)")
MATMUL_PINNED = N_("Guide matmul ({mode} mode, all on {device})")
MATMUL_INPUTS = N_("Guide matmul ({mode} mode, a and b on {inputs})")
MATMUL_BOTH = N_("Guide matmul ({mode} mode, all on {device}, a and b on {inputs})")
STRING_OP = N_("A string op (AsString) on {device} ({mode} mode)")
TOWERS = N_("Guide towers on {devices}, summed on {reduce_on} ({mode} mode)")
ONE_TOWER = N_("Guide towers on {devices} ({mode} mode): one tower, so nothing is summed "
               "(no tf.add_n ran; --reduce-on unused)")
TRAINING = N_("Tower training: {count} towers on {devices}, variables and averaging on {variables}")
TRAINING_ONE = N_("Tower training: 1 tower on {devices}, variables and averaging on {variables}")
MIRRORED_LOOP = N_("MirroredStrategy over {devices} (custom loop, --reduce {reduce})")
MIRRORED_FIT = N_("MirroredStrategy over {devices} (Keras fit, --reduce {reduce})")
TRACE = N_("trace of {script} (exit code {code})")


# The roles (groups) the lessons give ops; names of code (average_gradients) stay plain strings.
FORWARD = Message(N_("forward"))
READS = Message(N_("variable reads"))
GRADIENTS = Message(N_("gradients"))
ALL_REDUCE = Message(N_("all_reduce"))
APPLY = Message(N_("apply"))
OTHER_PART = Message(N_("other"))
VARIABLES = Message(N_("variables"))
INPUT = Message(N_("input"))
LOSS = Message(N_("loss"))
INIT = Message(N_("init"))
CHECK = Message(N_("check"))
REDUCE = Message(N_("reduce"))
OTHER = Message(N_("(other)"))  # no role given
REDUCE_LOSS = Message(N_("reduce_loss (strategy.reduce)"))
STEP_OTHER = Message(N_("train step: arguments, results, other"))
SETUP = Message(N_("setup (variables, data; eager)"))
TOP_SCOPE = Message(N_("(top level)"))  # the digest's scopes that are no name
EAGER_SCOPE = Message(N_("(eager ops)"))
TOWER = N_("tower {number}: {part}")
REPLICA = N_("replica {number}: {part}")
_UNITS = {TOWER: N_("towers {first}-{last}: {part}"), REPLICA: N_("replicas {first}-{last}: {part}")}


GUIDE_TOWER = N_("tower {number} ({device})")  # the guide's towers: one matmul on each device


def guide_tower(number: int, device: str) -> Message:
    return Message(GUIDE_TOWER, number=number, device=device)


TOWER_AT = N_("tower {number}: {device}")  # where a guide tower's matmul ran


def tower_at(number: int, device: str) -> Message:
    return Message(TOWER_AT, number=number, device=device)


def tower_role(number: int, part: Message) -> Message:
    return Message(TOWER, number=number, part=part)


def replica_role(number: int, part: Message) -> Message:
    return Message(REPLICA, number=number, part=part)


def unit(role: object) -> tuple[str, int, object] | None:
    """(its template, its number, its part) of a tower's or a replica's role; None for any other."""
    if isinstance(role, Message) and role.template in _UNITS:
        return role.template, int(role.fields["number"]), role.fields["part"]  # type: ignore[call-overload]
    return None


def units_role(template: str, first: int, last: int, part: object) -> Message:
    """The roles ``first`` to ``last`` of one kind (``template``: TOWER or REPLICA) and one part, summed."""
    return Message(_UNITS[template], first=first, last=last, part=part)


# The training lessons' expected-bytes formulas, their terms, notes and the computed ring copies.
FORMULA_MIRRORED = N_("2 x (replicas - 1) x gradient bytes + the other replicas' losses + int32 labels sent from CPU:0")
FORMULA_TRAIN = N_("2 x parameter bytes x towers + input bytes + fetched losses, for the towers off {device}")
FORMULA_TRAIN_SHARED = N_("parameter bytes x (tower devices + towers) + input bytes + fetched losses, for the towers "
                          "off {device}")
NOTE_RING = Message(N_("The gradients travel inside the collective all-reduce ops, where no _Send shows them: their "
                       "bytes are computed (ring: each device sends 2(n-1)/n x the gradient bytes)."))
NOTE_NCCL = Message(N_("NcclAllReduce runs NVIDIA's NCCL library between GPUs only: no CPU kernel exists, so on CPU "
                       "replicas it cannot run. Use --reduce collective (MirroredStrategy's default) or one-device."))
RING_TENSOR = Message(N_("gradients (ring all-reduce)"))
REDUCE_DEFAULT = N_("--reduce {reduce} (MirroredStrategy's default)")
REDUCE_CHOSEN = N_("--reduce {reduce}")
MODE_FIT = Message(N_("Keras fit"))
MODE_LOOP = Message(N_("custom loop: strategy.run, all_reduce, strategy.reduce"))
LOSSES = Message(N_("losses"))
LABELS = Message(N_("labels"))
FETCHED_LOSS = Message(N_("fetched loss"))
DOWN_AND_BACK_OF = (N_("parameters down to {count} tower (of {total}) and gradients back"),
                    N_("parameters down to {count} towers (of {total}) and gradients back"))
DOWN_AND_BACK = (N_("parameters down to {count} tower and gradients back"),
                 N_("parameters down to {count} towers and gradients back"))
DOWN_TO_DEVICES = (N_("parameters down to {count} tower device"), N_("parameters down to {count} tower devices"))
BACK_FROM = (N_("gradients back from {count} tower"), N_("gradients back from {count} towers"))
TERM = "{label}: {arithmetic}"  # no words of its own: nothing to translate


def counted(templates: tuple[str, str], count: int, **fields: object) -> Message:
    """The singular (count 1) or plural template of a pair, with its count."""
    return Message(templates[count != 1], count=count, **fields)


def term(label: Message, arithmetic: str) -> Message:
    """A term of an expected-bytes sum: what it is (translated) and how it was worked out (numbers)."""
    return Message(TERM, label=label, arithmetic=arithmetic)


def term_label(what: object) -> object:
    """What a term is, without its arithmetic."""
    return what.fields["label"] if isinstance(what, Message) and what.template == TERM else what


# How text from a user or a log is made safe to show, and cut to fit a line: one home for each.
# invisible format characters a terminal obeys instead of showing: bidi marks, embeddings, overrides and
# isolates (U+202E reverses the rest of a table row), zero-width spaces and joiners, the BOM
_FORMAT = "\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff"
_CONTROL = re.compile(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f{_FORMAT}]")  # control characters, but for tab and newline
_NOT_IN_A_LINE = re.compile(f"[\\x00-\\x1f\\x7f-\\x9f{_FORMAT}]")
_C0_BUT_LINE_BREAKS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # a saved report's string may hold one; no stream encodes it


def clean(text: str | None) -> str:
    """Log text made safe to show: no escape sequences, other control characters or invisible format
    characters (U+FFFD instead)."""
    return _CONTROL.sub("\N{REPLACEMENT CHARACTER}", text) if text else ""


def one_line(name: str) -> str:
    """A name from the command line (a script's) as one line shows it wherever it appears: its
    control characters, newlines and tabs included, become U+FFFD (as every name from a log does)."""
    return _NOT_IN_A_LINE.sub("\N{REPLACEMENT CHARACTER}", name)


def parseable(text: str) -> str:
    """Captured text as the parser may read it: C0 control characters but tab and line breaks (a
    program's escape sequences, NULs) become U+FFFD, so no line of it is read as another; what is not
    a control character (a node's name in any script) is kept as written."""
    return _C0_BUT_LINE_BREAKS.sub("\N{REPLACEMENT CHARACTER}", text)


def cut(text: str, limit: int, mark: str = "...") -> str:
    """A user's value cut to fit a one-line message: at most ``limit`` characters, ``mark`` the last of them."""
    return text if len(text) <= limit else text[: limit - len(mark)] + mark


def quoted(value: str, limit: int = 60, mark: str = "...") -> str:
    """A user's value as every message quotes it: in quotes, cut to ``limit`` characters (``mark`` the
    last of them), backslashes as typed, control and unprintable characters escaped (never sent to the
    terminal), a byte that is not UTF-8 as \\xff."""
    return "'" + "".join(c if c.isprintable() else _escaped(c) for c in cut(value, limit, mark)) + "'"


def _escaped(char: str) -> str:
    """\\xff for a byte that is not UTF-8 (Python reads it as U+DCFF), else Python's escape."""
    return f"\\x{ord(char) - 0xDC00:02x}" if 0xDC80 <= ord(char) <= 0xDCFF else ascii(char)[1:-1]


# the demo's cost lesson (tensorflow#2441)
TOWER_GRADIENTS = N_("tower gradients on {devices}, colocate_gradients_with_ops={colocate}")
# Why a rule of `placement check` failed.
CHECK_MAX_ON = N_("placements on {device}: {count}, at most {limit} allowed")
CHECK_EXPECT = N_("nodes matching {regex} not on {device}: {count} of {total}")
CHECK_EXPECT_NONE = N_("no node matches {regex}")
CHECK_FALLBACK = N_("soft fallbacks (ops placed elsewhere than they asked): {count}")
CHECK_FALLBACK_XLA = N_("soft fallbacks (ops placed elsewhere than they asked): {count}; ops of XLA-compiled functions "
                        "run in a cluster on another device than they asked: {xla}")
CHECK_MAX_ON_DISTINCT = N_("distinct placements on {device}: {count} ({logged} logged), at most {limit} allowed")
CHECK_PLACEMENT_ERRORS = N_("placement errors in the input: {count} (TensorFlow could not place the graph as asked; "
                            "--allow-placement-errors lets such an input pass)")
CHECK_COPY_BYTES = N_("bytes copied between devices per step: {bytes}, at most {limit} allowed")
CHECK_COPY_TIME = N_("time spent copying between devices per step: {time}, at most {limit} allowed")
CHECK_BUSY = N_("{device} busy {share} of a step, at most {limit} allowed")


# `placement diff`'s two sides (singular, plural).
DIFF_OLD = (N_("OLD: {name} ({count} placement)"), N_("OLD: {name} ({count} placements)"))
DIFF_NEW = (N_("NEW: {name} ({count} placement)"), N_("NEW: {name} ({count} placements)"))


# A run or a task stopped because GPU memory or a GPU library handle could not be had (a Cause whose
# gpu_taken is true): one line, TensorFlow's remedies and one GPU per task.
GPU_TAKEN = Message(N_("TensorFlow could not get GPU memory or a GPU library handle, as happens when other processes "
                       "hold the GPU (each TensorFlow process reserves nearly all its memory): let them share it with "
                       "memory growth (TF_FORCE_GPU_ALLOW_GROWTH=true, tf.config.experimental.set_memory_growth or "
                       "gpu_options.allow_growth) or a memory fraction (gpu_options.per_process_gpu_memory_fraction, "
                       "or a logical device's memory_limit), or give each task its own GPU (CUDA_VISIBLE_DEVICES)"))
# ... where `placement cluster` ran the tasks: its own options set their memory policy
GPU_TAKEN_CLUSTER = Message(N_("TensorFlow could not get GPU memory or a GPU library handle, as happens when other "
                               "processes hold the GPU (each TensorFlow process reserves nearly all its memory): let "
                               "the tasks share it with placement cluster --gpu-memory growth (each takes memory as it "
                               "needs it) or --gpu-memory share (each a fixed fraction), keep the ps tasks off it "
                               "(--ps-on-cpu), and do not set TF_FORCE_GPU_ALLOW_GROWTH=false (yours wins over both)"))
# ... where `placement trace --cluster` ran your tasks: its own option gives each its GPU(s)
GPU_TAKEN_TRACE_CLUSTER = Message(N_("TensorFlow could not get GPU memory or a GPU library handle, as happens when "
                                     "other processes hold the GPU (each TensorFlow process reserves nearly all its "
                                     "memory): give each task its own GPU with placement trace --cluster --split-gpus "
                                     "(or --gpu-list IDS), or let the tasks share it with memory growth "
                                     "(TF_FORCE_GPU_ALLOW_GROWTH=true, which every task inherits, or "
                                     "tf.config.experimental.set_memory_growth) or a memory fraction "
                                     "(gpu_options.per_process_gpu_memory_fraction)"))


# ---------------------------------------------------------------- how to proceed after a placement error
# (render.parts.HINTS picks them by the error's kind, whether its colocation group required a device,
# and what the command offers; {fix}, {pins}, {device} and {cpus} are filled there)
HINT_MALFORMED = N_("The device string is malformed; soft placement cannot fix that. Write it as "
                    "/job:J/replica:R/task:T/device:TYPE:N, or short as /cpu:0 or /gpu:1.")
HINT_RUN_FAILED = N_("TensorFlow stopped the run with an error that is not a placement error placement knows: "
                     "its message says why (--json holds it whole).")
# in a program, or in the log of one
HINT_SOFT_IN_PROGRAM = N_("allow soft placement (ConfigProto(allow_soft_placement=True) in TF1, "
                          "tf.config.set_soft_device_placement(True) in TF2)")
HINT_FIX = N_("or {soft} so TensorFlow chooses a device that can run it.")
PINS_PRESENT = N_("The program pins an op to a device that does not exist")
PINS_PAST = N_("The program pinned an op to a device that did not exist")
HINT_PIN_EXISTING = N_("{pins}: pin it to a device that exists (tf.config.list_logical_devices() lists them), {fix}")
HINT_PIN_KERNEL = N_("TensorFlow has no kernel of this op for the requested device type: pin the op to a "
                     "device type that has one (the CPU runs almost every op), {fix}")
HINT_GROUP_VARIABLE = N_("This op was colocated with a group of ops (a variable and the ops that use it, or a "
                         "colocate_with) that required {device}, and it cannot run there (it may have no kernel for "
                         "it, or ask for another device): put the group's variable on a device every op of the group "
                         "can run on (create it under that tf.device), {fix}")
HINT_SHARE_PAST = N_("Ops that must share a device (a variable and the ops using it, or a colocate_with) "
                     "were pinned to different devices: pin them to one device, {fix}")
HINT_SHARE_PRESENT = N_("Ops that must share a device (a variable and the ops using it, or a colocate_with) "
                        "are pinned to different devices: pin them to one device, {fix}")
HINT_CHANGE_PIN = N_("No device satisfies this op's constraints (TensorFlow's message says which): change the pin, "
                     "{fix}")
# in a command of placement's own lessons ({cpus}: where --cpus is offered)
HINT_CPUS = N_(", or use --cpus N with /cpu:K devices to try the same lesson across several (logical) devices "
               "on this machine")
HINT_NOT_FOUND_SOFT = N_("Rerun with --soft to let TensorFlow fall back to a device that exists, or pin to a device "
                         "listed by `placement devices`{cpus}.")
HINT_NOT_FOUND = N_("Pin to a device listed by `placement devices`{cpus}.")
HINT_NO_KERNEL_SOFT = N_("This op has no kernel for the requested device type. Rerun with --soft to let TensorFlow "
                         "run it on a device type that has one, or pin it to a device type with a kernel (CPU).")
HINT_NO_KERNEL = N_("This op has no kernel for the requested device type. Pin it to a device type with a "
                    "kernel (CPU).")
HINT_GROUP = N_("This op was colocated with a group of ops that required {device}, and it cannot run there.")
HINT_GROUP_SOFT = N_("Pin the group to a device every op of it can run on, or rerun with --soft.")
HINT_GROUP_PIN = N_("Pin the group to a device every op of it can run on.")
HINT_APART_SOFT = N_("Ops that must share a device were pinned apart. Pin them together, or rerun with --soft.")
HINT_APART = N_("Ops that must share a device were pinned apart. Pin them together.")
HINT_UNSATISFIABLE_SOFT = N_("No device satisfies this op's constraints (TensorFlow's message says which); rerun with "
                             "--soft to let TensorFlow choose a device.")
HINT_UNSATISFIABLE = N_("No device satisfies this op's constraints (TensorFlow's message says which).")


def duration(us: float) -> str:
    """Microseconds as a person reads them: ``812 us``, ``5.31 ms``, ``1.2 s`` (three figures; ASCII, so
    any output encoding shows them); ``?`` for a time that is not a number."""
    if not math.isfinite(us):
        return "?"
    if us < 0:
        return "-" + duration(-us)
    if us < 1000:
        return f"{us:.3g} us" if us < 100 else f"{us:.0f} us"
    if us < 1_000_000:
        return f"{us / 1000:.3g} ms" if us < 100_000 else f"{us / 1000:.0f} ms"
    return f"{us / 1e6:.3g} s"
