"""Device-name parsing and normalising (``/gpu:0`` <-> ``/job:.../device:GPU:0``)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from placement_cli.exceptions import DeviceSpecError
from placement_cli.messages import cut, quoted

_PART = re.compile(r"(job|replica|task|device|cpu|gpu):([^/]*)", re.IGNORECASE)
_TYPE_INDEX = re.compile(r"([A-Za-z][A-Za-z0-9_]*):(\d+|\*)")
# A type as a log may print it: pluggable and test devices register names such as "_CUSTOM".
_LOGGED_TYPE_INDEX = re.compile(r"([A-Za-z_][A-Za-z0-9_]*):(\d+|\*)")
JOB_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")  # TensorFlow's IsJobName
_INT_MAX = 2**31 - 1  # ids past this do not name a device (TensorFlow stores them in an int)
_BARE_TYPES = frozenset({"CPU", "GPU", "TPU", "CUSTOM", "EPU"})  # TF accepts these without "device:"
# TensorFlow's XLA devices (made only when TF_XLA_FLAGS=--tf_xla_enable_xla_devices is set before it
# starts): options take them as "/device:XLA_CPU:0", and as "/xla_cpu:0" or "XLA_CPU:0", which
# TensorFlow's own parser refuses, so they are handed to it in the first spelling.
XLA_TYPES = frozenset({"XLA_CPU", "XLA_GPU"})


@dataclass(frozen=True)
class DeviceSpec:
    """A (possibly partial) TensorFlow device specification."""

    job: str | None = None
    replica: int | None = None
    task: int | None = None
    device_type: str | None = None
    device_index: int | None = None

    @property
    def canonical(self) -> str:
        """Full name, defaults filled in: ``/job:J/replica:R/task:T/device:TYPE:N``."""
        job = self.job or "localhost"
        replica = 0 if self.replica is None else self.replica
        task = 0 if self.task is None else self.task
        tail = ""
        if self.device_type is not None:
            index = "*" if self.device_index is None else self.device_index
            tail = f"/device:{self.device_type}:{index}"
        return f"/job:{job}/replica:{replica}/task:{task}{tail}"

    @property
    def task_key(self) -> tuple[str, int, int]:
        """The task it belongs to: (job, replica, task), TensorFlow's defaults filled in."""
        return self.job or "localhost", self.replica or 0, self.task or 0

    @property
    def order(self) -> tuple[str, int, int, str, int]:
        """Where it sorts among devices: task by task (worker/2 before worker/10), then type and index."""
        return (*self.task_key, self.device_type or "", -1 if self.device_index is None else self.device_index)

    @property
    def spec(self) -> str:
        """Only the fields that were given, in TensorFlow's modern spelling."""
        parts = []
        if self.job is not None:
            parts.append(f"/job:{self.job}")
        if self.replica is not None:
            parts.append(f"/replica:{self.replica}")
        if self.task is not None:
            parts.append(f"/task:{self.task}")
        if self.device_type is not None:
            index = "*" if self.device_index is None else self.device_index
            parts.append(f"/device:{self.device_type}:{index}")
        return "".join(parts)

    @property
    def short(self) -> str:
        """Short display name: ``CPU:0``, ``GPU:1``, ``ps/0 CPU:0``."""
        kind = ""
        if self.device_type is not None:
            kind = self.device_type if self.device_index is None else f"{self.device_type}:{self.device_index}"
        if self.job in (None, "localhost"):
            return kind or self.spec or "?"
        where = self.job if self.task is None else f"{self.job}/{self.task}"
        return f"{where} {kind}".strip()

    def satisfied_by(self, other: DeviceSpec) -> bool:
        """True when every field this spec sets has the same value in ``other``."""
        pairs = (
            (self.job, other.job or "localhost"),
            (self.replica, other.replica or 0),
            (self.task, other.task or 0),
            (self.device_index, other.device_index),
        )
        if any(mine is not None and mine != theirs for mine, theirs in pairs):
            return False
        if self.device_type is None:
            return True
        return (other.device_type or "").upper() == self.device_type.upper()


def parse_device(text: str, *, logged: bool = False) -> DeviceSpec:
    """Parse any spelling TensorFlow has used for a device; raise DeviceSpecError if malformed.

    ``logged``: the name was printed by TensorFlow, so any device type it registered is
    accepted (a pluggable device's ``/device:_CUSTOM:0``); options a user types stay strict."""
    raw = text.strip()
    if not raw:
        raise DeviceSpecError("empty device string")
    body = raw if raw.startswith("/") else "/" + raw
    fields: dict[str, object] = {}
    for chunk in body.split("/")[1:]:
        if not chunk:
            raise DeviceSpecError(f"empty component in device string {_quoted(raw)}")
        if chunk.upper() in _BARE_TYPES and "device_type" not in fields:  # "/gpu": any GPU, as TF reads it
            _set_type_index(fields, chunk, "*", raw)
            continue
        match = _PART.fullmatch(chunk)
        if match is None:
            type_index = _TYPE_INDEX.fullmatch(chunk)
            if type_index is None or "device_type" in fields or type_index.group(1).upper() not in _BARE_TYPES:
                raise DeviceSpecError(f"unknown component {_quoted(chunk)} in device string {_quoted(raw)}")
            _set_type_index(fields, type_index.group(1), type_index.group(2), raw)
            continue
        key, value = match.group(1).lower(), match.group(2)
        if key in ("cpu", "gpu"):
            _set_type_index(fields, key, value, raw)
        elif key == "device":
            type_index = (_LOGGED_TYPE_INDEX if logged else _TYPE_INDEX).fullmatch(value)
            if type_index is None:
                raise DeviceSpecError(f"bad device component {_quoted(chunk)} in {_quoted(raw)}")
            _set_type_index(fields, type_index.group(1), type_index.group(2), raw)
        elif key == "job":
            if not value:
                raise DeviceSpecError(f"empty job name in {_quoted(raw)}")
            fields["job"] = value
        else:
            if not (value.isascii() and value.isdigit()):
                raise DeviceSpecError(f"{key} must be a number in {_quoted(raw)}, not {_quoted(value)}")
            fields[key] = _whole(value, key, raw)
    return DeviceSpec(**fields)  # type: ignore[arg-type]


class DeviceName(str):
    """A device as it was written (by TensorFlow's log, a user, a saved report), read once where it
    enters the model: ``spec`` is what TensorFlow's grammar makes of it (None: it names no device),
    ``short`` how tables name it. As a string it is the name as written (JSON, comparisons), so a
    report says a device the way its source did."""

    spec: DeviceSpec | None

    def __new__(cls, text: str) -> DeviceName:
        if type(text) is DeviceName:
            return text
        return _device_name(str(text))

    def __reduce__(self) -> tuple[type[DeviceName], tuple[str]]:
        return DeviceName, (str(self),)

    @property
    def short(self) -> str:
        """``CPU:0``, ``ps/0 CPU:0``; the name itself where it names no device."""
        return self.spec.short if self.spec is not None else str(self)

    @property
    def task_key(self) -> tuple[str, int, int] | None:
        """The task it is on (job, replica, task; localhost's where it names none); None: no device."""
        return None if self.spec is None else self.spec.task_key

    @property
    def request(self) -> DeviceSpec | None:
        """What it asks for as a request (tf.device, a node's device field): TensorFlow's request
        grammar, stricter than its log's (no type a log may name, such as a pluggable _CUSTOM);
        None where it asks for no device it can name."""
        return _request(str(self))


@functools.lru_cache(maxsize=4096)  # a log names a few devices many times
def _device_name(text: str) -> DeviceName:
    name = str.__new__(DeviceName, text)
    try:
        name.spec = parse_device(text, logged=True)
    except DeviceSpecError:
        name.spec = None
    return name


@functools.lru_cache(maxsize=4096)
def _request(text: str) -> DeviceSpec | None:
    return try_parse(text)


def device_name(text: str | None) -> DeviceName | None:
    """``text`` as a DeviceName; None as None."""
    return None if text is None else DeviceName(text)


class DeviceNames:
    """Device names read once each (a log names a few devices millions of times); a name that is not a
    device (a saved report may hold anything) stands as its own device type."""

    def __init__(self) -> None:
        self.specs: dict[str, DeviceSpec] = {}

    def spec(self, device: str) -> DeviceSpec:
        spec = self.specs.get(device)
        if spec is None:
            spec = DeviceName(device).spec
            if spec is None:
                spec = DeviceSpec(device_type=device)
            self.specs[device] = spec
        return spec

    def task(self, device: str) -> tuple[str, int, int]:
        """The task ``device`` names (job, replica, task; where it names none, localhost's)."""
        return self.spec(device).task_key


def _set_type_index(fields: dict[str, object], kind: str, index: str, raw: str) -> None:
    if not ((index.isascii() and index.isdigit()) or index == "*"):
        raise DeviceSpecError(f"device index must be a number in {_quoted(raw)}, not {_quoted(index)}")
    fields["device_type"] = kind.upper()
    fields["device_index"] = None if index == "*" else _whole(index, "device index", raw)


def _whole(digits: str, what: str, raw: str) -> int:
    """A number of a device name; one of 4,300 digits or more is no int to Python (a ValueError in
    words about sys), and of more than 100 none that TensorFlow could hold."""
    if len(digits) > 100:
        raise DeviceSpecError(f"{what} {_brief(digits)} in {_quoted(raw)} is too large")
    return int(digits)


def tf_rejects(text: str) -> bool:
    """True when TensorFlow's device-name grammar (``DeviceNameUtils::ParseFullName``)
    cannot read ``text``: a job that is not a name, an id too big to be one, a type that
    does not start with a letter. TensorFlow words this "Malformed device specification"
    in graphs, but "unknown device" in eager mode."""
    try:
        spec = parse_device(text)
    except DeviceSpecError:
        return True
    if spec.job is not None and not JOB_NAME.fullmatch(spec.job):
        return True
    return any(n is not None and n > _INT_MAX for n in (spec.replica, spec.task, spec.device_index))


def try_parse(text: str | None) -> DeviceSpec | None:
    """Like parse_device, but None for None or unparseable text."""
    if not text:
        return None
    try:
        return parse_device(text)
    except DeviceSpecError:
        return None


# The tables' short names, read back (what DeviceSpec.short writes): a bare type, a device of any type
# (XLA_GPU:0; TensorFlow's own grammar wants /device:XLA_GPU:0), a task (ps/0) or a task's device (ps/0 CPU:0).
BARE_TYPE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SHORT_DEVICE = re.compile(r"(?P<type>[A-Za-z_][A-Za-z0-9_]*):(?P<index>[0-9]+)")
_SHORT_TASK = re.compile(r"(?P<task>[A-Za-z][A-Za-z0-9_]*/[0-9]+)(?: +[A-Za-z_][A-Za-z0-9_]*:[0-9]+)?")


def short_device(value: str) -> DeviceSpec | None:
    """``XLA_GPU:0`` as the tables write it: a device of that type and index on any task."""
    found = _SHORT_DEVICE.fullmatch(value)
    return DeviceSpec(device_type=found["type"], device_index=int(found["index"])) if found else None


def short_task(value: str) -> DeviceSpec | None:
    """A task as the tables name it (``ps/0``, ``ps/0 CPU:0``) as a device spec; None for anything else."""
    found = _SHORT_TASK.fullmatch(" ".join(value.split()))
    if found is None:
        return None
    job, _slash, task = found["task"].partition("/")
    device = short_device(found.group(0)[len(found["task"]):].strip())
    return DeviceSpec(job=job, task=int(task), device_type=device.device_type if device else None,
                      device_index=device.device_index if device else None)


def named_by(value: str) -> DeviceSpec | None:
    """What a device a user names (a --device filter, a rule's device) stands for, read in every form
    placement knows: a bare type (``GPU``), a task or its device as tables name them (``ps/0 CPU:0``),
    any spelling TensorFlow accepts (``/job:ps``, ``GPU:1``), a device of any type (``XLA_GPU:0``); a
    spec whose unset fields match anything; None where it names none."""
    want = " ".join(value.split())
    if BARE_TYPE.fullmatch(want):
        return DeviceSpec(device_type=want)
    return short_task(want) or try_parse(want) or short_device(want)


def short_name(text: str) -> str:
    """How tables name a device (``CPU:0``, ``ps/0 CPU:0``), read once as a DeviceName (the name of an
    aggregate: a count's key, a column); the text itself where it names no device."""
    return DeviceName(text).short


def parse_indices(text: str) -> list[int]:
    """``2,3`` or ``0-3`` (or a mix) into GPU indices; DeviceSpecError on bad input."""
    indices: list[int] = []
    for part in text.split(","):
        part = part.strip()
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise DeviceSpecError(f"bad device index {_quoted(part)} in {_quoted(text)}: use numbers like 2,3 or 0-3")
        span = range(int(lo), int(hi) + 1) if sep else [int(lo)]
        if not span:
            raise DeviceSpecError(f"empty range {_quoted(part)} in {_quoted(text)}")
        indices.extend(span)
    if len(set(indices)) != len(indices):
        raise DeviceSpecError(f"duplicate device index in {_quoted(text)}")
    return indices


# What a user may type in a run command's device options: TensorFlow's own grammar
# (DeviceNameUtils::ParseFullName behind tf.device's Python DeviceSpec), checked before
# anything runs, so TensorFlow never rejects the string later, nor silently reads it as
# another device.
INT32_MAX = 2**31 - 1  # TensorFlow holds replica, task and device numbers in a 32-bit int

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")  # job names and device types
_NUMBER = re.compile(r"[0-9]+")
_SPAN = re.compile(r"([0-9]+)(?:-([0-9]+))?")
_FIELDS = ("job", "replica", "task", "device")  # lower case only, as TensorFlow spells them


def parse_option_device(text: str) -> DeviceSpec:
    """A device typed in an option (``--device``, ``--devices``, ``--reduce-on``), held to
    what TensorFlow accepts; DeviceSpecError (exit 2) says what is wrong."""
    raw = text.strip()
    if not raw:
        raise DeviceSpecError("empty device string")
    odd = next((c for c in raw if not (c.isascii() and c.isprintable()) or c.isspace()), None)
    if odd is not None:
        raise DeviceSpecError(f"{_quoted(odd)} in device string {_quoted(raw)}: TensorFlow's device names use "
                              "only ASCII letters, digits, _, / and :")
    seen: set[str] = set()
    for chunk in (raw if raw.startswith("/") else "/" + raw).split("/")[1:]:
        if not chunk:
            raise DeviceSpecError(f"empty component in device string {_quoted(raw)}")
        key, colon, value = chunk.partition(":")
        if colon and key.upper() in XLA_TYPES:
            key, value = "device", f"{key.upper()}:{value}"  # /xla_cpu:0 is /device:XLA_CPU:0
        if not colon and key.upper() in _BARE_TYPES and key.lower() in ("cpu", "gpu"):
            if "device type" in seen:
                raise DeviceSpecError(f"more than one device type in {_quoted(raw)}")
            seen.add("device type")  # "/gpu": any GPU, as TensorFlow reads it
            continue
        if key.lower() in _FIELDS and key != key.lower():
            raise DeviceSpecError(f"{_quoted(key)} in {_quoted(raw)}: TensorFlow only reads {_quoted(key.lower())} "
                                  "in lower case")
        field = key if key in ("job", "replica", "task") else "device type"
        if field in seen:
            raise DeviceSpecError(f"more than one {field} in {_quoted(raw)}")
        seen.add(field)
        if key == "job":
            if not _NAME.fullmatch(value):
                raise DeviceSpecError(f"job name {_quoted(value)} in {_quoted(raw)}: TensorFlow's job names "
                                      "are a letter, then letters, digits or _")
            continue
        if key == "device":
            value_type, _, value = value.partition(":")
            if not _NAME.fullmatch(value_type):
                raise DeviceSpecError(f"device type {_quoted(value_type)} in {_quoted(raw)}: TensorFlow's "
                                      "device types are a letter, then letters, digits or _")
        elif key not in ("replica", "task") and key.upper() not in _BARE_TYPES:
            raise DeviceSpecError(f"unknown component {_quoted(chunk)} in device string {_quoted(raw)}")
        if value != "*" or key in ("replica", "task"):
            _check_number(value, key if key in ("replica", "task") else "device index", raw)
    return parse_device(xla_spelling(raw))


def xla_spelling(text: str) -> str:
    """A device as TensorFlow reads it: ``/xla_cpu:0`` and ``XLA_CPU:0`` as ``/device:XLA_CPU:0``
    (TensorFlow's parser knows no bare XLA type); any other device as it was given."""
    raw = text.strip()
    chunks = [c[len("device:"):] if c.lower().startswith("device:") else c  # /device:xla_cpu:0 too
              for c in (raw if raw.startswith("/") else "/" + raw).split("/")[1:]]
    if not any(c.partition(":")[0].upper() in XLA_TYPES and c.partition(":")[1] for c in chunks):
        return raw
    return "".join("/device:" + c.upper() if c.partition(":")[0].upper() in XLA_TYPES else "/" + c for c in chunks)


def names_xla(devices: object) -> bool:
    """True when any of ``devices`` (device strings or None, as options hold them) is an XLA device:
    only then does a run turn TensorFlow's XLA devices on."""
    texts = [devices] if isinstance(devices, str) else list(devices or ())  # type: ignore[call-overload]
    specs = (try_parse(xla_spelling(t)) for t in texts if isinstance(t, str) and t.strip())
    return any(s is not None and s.device_type in XLA_TYPES for s in specs)


def _check_number(value: str, what: str, raw: str) -> int:
    if not _NUMBER.fullmatch(value):
        raise DeviceSpecError(f"{what} must be a number in {_quoted(raw)}, not {_quoted(value)}")
    if len(value) > len(str(INT32_MAX)) or int(value) > INT32_MAX:
        raise DeviceSpecError(f"{what} {_brief(value)} in {_quoted(raw)} is too large: TensorFlow holds it "
                              f"in 32 bits (at most {INT32_MAX})")
    return int(value)


def parse_option_devices(text: str, most: int) -> list[DeviceSpec]:
    """``--devices``: a comma-separated list of distinct devices (compared in full, so
    ``/cpu:0`` and ``/CPU:0`` are one device), at most ``most`` of them (a lesson's cap)."""
    parts = text.split(",")
    if len(parts) > most:
        raise DeviceSpecError(f"{len(parts)} devices in --devices: the lesson runs at most {most} towers")
    specs = [parse_option_device(part) for part in parts]
    seen: dict[str, str] = {}
    for part, spec in zip(parts, specs):
        if spec.canonical in seen:
            raise DeviceSpecError(f"{_quoted(seen[spec.canonical])} and {_quoted(part.strip())} are the same device "
                                  f"({spec.canonical}) in {_quoted(text)}")
        seen[spec.canonical] = part.strip()
    return specs


def parse_option_indices(text: str, most: int) -> list[int]:
    """``--gpus``: ``2,3`` or ``0-3`` (or a mix), each index one TensorFlow can hold,
    at most ``most`` of them (a lesson's cap); DeviceSpecError on bad input."""
    total = 0
    for part in text.split(","):
        span = _SPAN.fullmatch(part.strip())
        if span is None:
            raise DeviceSpecError(f"bad GPU index {_quoted(part.strip())} in {_quoted(text)}: "
                                  "use numbers like 2,3 or 0-3")
        first = _check_number(span.group(1), "GPU index", text)
        last = first if span.group(2) is None else _check_number(span.group(2), "GPU index", text)
        if last < first:
            raise DeviceSpecError(f"empty range {_quoted(part.strip())} in {_quoted(text)}")
        total += last - first + 1
        if total > most:
            raise DeviceSpecError(f"{_quoted(text)} asks for more than {most} towers: the lesson runs "
                                  f"at most {most}")
    return parse_indices(text)


@dataclass(frozen=True)
class ChosenDevices:
    """The devices a lesson's option named (``--devices``, ``--gpus``; a default's ``--towers``), each
    read once, as TensorFlow reads it."""

    names: tuple[DeviceName, ...]
    option: str
    text: str = ""  # as the option was given (help shows a default so)

    def __str__(self) -> str:
        return self.text or ",".join(self.names)


def option_device(text: str) -> DeviceName:
    """A device typed in an option (``--device``, ``--reduce-on``), held to what TensorFlow accepts
    (DeviceSpecError says what is wrong), spelt as TensorFlow reads it (xla_spelling)."""
    parse_option_device(text)
    return DeviceName(xla_spelling(text))


def option_devices(text: str, most: int) -> ChosenDevices:
    """``--devices``: distinct devices, at most ``most`` (see parse_option_devices)."""
    parse_option_devices(text, most)
    return ChosenDevices(tuple(DeviceName(xla_spelling(part)) for part in text.split(",")), "--devices", text)


def option_gpus(text: str, most: int) -> ChosenDevices:
    """``--gpus``: ``2,3`` or ``0-3`` as the GPUs ``/gpu:2``, ``/gpu:3`` (see parse_option_indices)."""
    return ChosenDevices(tuple(DeviceName(f"/gpu:{i}") for i in parse_option_indices(text, most)), "--gpus", text)


def _brief(text: str, limit: int = 40) -> str:
    """A user's string cut to fit a one-line message."""
    return cut(text, limit, "\N{HORIZONTAL ELLIPSIS}")


def _quoted(text: str) -> str:
    """A user's string quoted in a one-line message: long enough for a device's full name
    (``/job:localhost/replica:0/task:0/device:CPU:0``, 44 characters) to be seen whole."""
    return quoted(text, 60, "\N{HORIZONTAL ELLIPSIS}")


def crosses_memory(source: str, target: str, *, virtual_gpus: bool = False) -> bool | None:
    """False for a copy between logical devices that share one memory (CPUs of one task; logical GPUs
    carved from one GPU with --virtual-gpus): the bytes are what would cross a real device boundary.
    True when it leaves a device's memory; None when the names cannot be read."""
    a, b = try_parse(source), try_parse(target)
    if a is None or b is None:
        return None
    same_task = (a.job, a.replica, a.task) == (b.job, b.replica, b.task)
    if not same_task:
        return True
    if a.device_type == b.device_type == "CPU":
        return False
    return not (a.device_type == b.device_type == "GPU" and virtual_gpus)
