"""Cluster descriptions as TensorFlow writes them: a ClusterSpec dict, or TF_CONFIG (no tensorflow)."""

from __future__ import annotations

import ipaddress
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from placement_cli.devices import JOB_NAME
from placement_cli.exceptions import UsageProblem
from placement_cli.messages import quoted

# host:port, host a name, an IPv4 address or a bracketed IPv6 address
_ADDRESS = re.compile(r"(?P<host>\[[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*(?:%[A-Za-z0-9_.\-]+)?\]|[A-Za-z0-9_.\-]+)"
                      r":(?P<port>[0-9]{1,5})")
_MAX_TASKS = 1024
_MAX_TEXT = 1 << 20  # a cluster description bigger than this is not one
# TensorFlow keeps a task index in an int32 (a device name's task:N, a device filter): a bigger one
# crashes the servers that read it, so it is refused here
_MAX_INDEX = 2**31 - 1
_INDEX = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class Task:
    """One task of a cluster: its job, its index in the job and its address."""

    job: str
    index: int
    address: str

    @property
    def host(self) -> str:
        return self.address.rsplit(":", 1)[0].strip("[]")

    @property
    def port(self) -> int:
        return int(self.address.rsplit(":", 1)[1])

    @property
    def target(self) -> str:
        return f"grpc://{self.address}"

    @property
    def name(self) -> str:
        """``/job:ps/task:0``, as a device name spells the task."""
        return f"/job:{self.job}/task:{self.index}"


@dataclass(frozen=True)
class Cluster:
    """Every task of a cluster, and (from TF_CONFIG) which one this process is."""

    jobs: dict[str, tuple[Task, ...]] = field(default_factory=dict)
    me: tuple[str, int] | None = None  # TF_CONFIG's task: (type, index)
    source: str = "cluster spec"

    @property
    def tasks(self) -> tuple[Task, ...]:
        return tuple(task for job in self.jobs.values() for task in job)

    def as_dict(self) -> dict[str, list[str] | dict[int, str]]:
        """The ClusterSpec dict TensorFlow takes (``tf.train.ClusterSpec(cluster.as_dict())``); a job
        whose indices have gaps keeps TensorFlow's sparse form ``{index: address}``."""
        out: dict[str, list[str] | dict[int, str]] = {}
        for job, tasks in self.jobs.items():
            dense = [task.index for task in tasks] == list(range(len(tasks)))
            out[job] = [t.address for t in tasks] if dense else {t.index: t.address for t in tasks}
        return out

    def count(self, job: str) -> int:
        return len(self.jobs.get(job, ()))


def from_text(text: str, source: str) -> Cluster:
    """A cluster from JSON text: a ClusterSpec dict (``{"ps": [...], "worker": [...]}``) or a
    TF_CONFIG object (``{"cluster": {...}, "task": {"type": ..., "index": ...}}``)."""
    if len(text) > _MAX_TEXT:
        raise UsageProblem(f"{source}: not a cluster description (over {_MAX_TEXT} characters)")
    try:
        data = json.loads(text, object_pairs_hook=lambda pairs: _unique(pairs, source))
    except (ValueError, RecursionError) as exc:  # ValueError: also a number of over 4300 digits
        raise UsageProblem(f"{source}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise UsageProblem(f"{source}: a cluster is a JSON object of job names, e.g. "
                           '{"ps": ["localhost:2222"], "worker": ["localhost:2223"]}')
    me = None
    if "cluster" not in data and _tf_config_only(data):
        raise UsageProblem(f"{source}: no \"cluster\": a TF_CONFIG that says which task this is, but not which "
                           "tasks make the cluster; add \"cluster\": {\"ps\": [\"host:port\"], "
                           "\"worker\": [\"host:port\"]}")
    if "cluster" in data:
        me = _task_of(data.get("task"), source)
        data = data["cluster"]
        if not isinstance(data, dict):
            raise UsageProblem(f"{source}: \"cluster\" must be a JSON object of job names")
    cluster = Cluster(jobs=_jobs(data, source), me=me, source=source)
    if me is not None and me[0] != "evaluator" and me[1] not in {t.index for t in cluster.jobs.get(me[0], ())}:
        raise UsageProblem(f"{source}: its task {me[0]}:{me[1]} is not in the cluster")
    return cluster


def from_file(path: str) -> Cluster:
    """A cluster from a JSON file (``--cluster-spec FILE``; ``-`` is not accepted)."""
    if not path:
        raise UsageProblem("--cluster-spec: the file name is empty")
    try:
        with Path(path).open("rb") as stream:  # at most one byte more than a description may have
            raw = stream.read(_MAX_TEXT + 1)
    except IsADirectoryError:
        raise UsageProblem(f"{path}: is a directory, not a cluster description") from None
    except OSError as exc:
        raise UsageProblem(f"{path}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UsageProblem(f"{path}: not a UTF-8 JSON file") from None
    return from_text(text, path)


def described(spec_file: str | None, flags_given: bool) -> tuple[Cluster | None, bool]:
    """The cluster a command is given (its --cluster-spec FILE; else TF_CONFIG, where no flag such as
    --ps/--workers describes one; None: the flags do), and whether a TF_CONFIG was set and ignored."""
    if spec_file is not None:
        return from_file(spec_file), False
    if not flags_given:
        return from_environment(), False
    return None, bool(_tf_config(os.environ))


def from_environment(environ: os._Environ[str] | dict[str, str] | None = None) -> Cluster | None:
    """The cluster TF_CONFIG describes, or None when it is unset or empty."""
    value = _tf_config(os.environ if environ is None else environ)
    return from_text(value, "TF_CONFIG") if value else None


def _tf_config(environ: Mapping[str, str]) -> str:
    """TF_CONFIG as set ("" when it is unset or blank)."""
    value = environ.get("TF_CONFIG", "")
    return value if value.strip() else ""


def _task_of(task: Any, source: str) -> tuple[str, int] | None:
    if task is None:
        return None
    if not isinstance(task, dict) or not isinstance(task.get("type"), str):
        raise UsageProblem(f"{source}: \"task\" must be an object such as {{\"type\": \"worker\", \"index\": 0}}")
    index = task.get("index", 0)
    if isinstance(index, str) and _INDEX.fullmatch(index.strip()) and len(index.strip()) <= 10:  # TensorFlow takes int(index) too
        index = int(index.strip())
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index <= _MAX_INDEX:
        raise UsageProblem(f"{source}: the task's index must be a whole number from 0 to {_MAX_INDEX}")
    return task["type"], index


def _jobs(data: dict[Any, Any], source: str) -> dict[str, tuple[Task, ...]]:
    if not data:
        raise UsageProblem(f"{source}: the cluster has no jobs")
    jobs: dict[str, tuple[Task, ...]] = {}
    total = 0
    for job, addresses in data.items():
        if not isinstance(job, str) or not JOB_NAME.fullmatch(job):
            raise UsageProblem(f"{source}: {quoted(job, 40)} is not a job name (a letter, then letters, digits or _)")
        if isinstance(addresses, dict):  # TensorFlow's sparse form: {"1": "host:port"}
            pairs = []
            for key, address in addresses.items():
                if not _INDEX.fullmatch(str(key)) or len(str(key)) > 10 or int(key) > _MAX_INDEX:
                    raise UsageProblem(f"{source}: job {quoted(job, 40)}: task index {quoted(str(key), 40)} is not a whole "
                                       f"number from 0 to {_MAX_INDEX}")
                pairs.append((int(key), address))
        elif isinstance(addresses, list):
            pairs = list(enumerate(addresses))
        else:
            raise UsageProblem(f"{source}: job {quoted(job, 40)} must list its tasks' addresses")
        if not pairs:
            raise UsageProblem(f"{source}: job {quoted(job, 40)} has no tasks")
        total += len(pairs)
        if total > _MAX_TASKS:
            raise UsageProblem(f"{source}: more than {_MAX_TASKS} tasks")
        jobs[job] = tuple(Task(job, index, _address(address, f"{source}: job {quoted(job, 40)} task {index}"))
                          for index, address in sorted(pairs))
    seen: dict[tuple[str, int], Task] = {}
    for task in (t for tasks in jobs.values() for t in tasks):
        key = (_machine(task.host), task.port)
        if key in seen:
            other = seen[key]
            if other.address == task.address:
                raise UsageProblem(f"{source}: {task.address} is given to both {other.name} and {task.name}")
            raise UsageProblem(f"{source}: {other.address} ({other.name}) and {task.address} ({task.name}) are one "
                               "port of one machine under two spellings: two servers cannot both listen there")
        seen[key] = task
    return jobs


def _machine(host: str) -> str:
    """The host, spelled one way: every spelling of this machine (localhost, 127.x.x.x, ::1,
    ::ffff:127.0.0.1, 0.0.0.0) is one, since a TensorFlow server listens on every interface of it;
    an IP address in its compressed form; a name in lower case without its final dot."""

    name = host.lower().rstrip(".")
    if name == "localhost":
        return "this machine"
    try:
        address = ipaddress.ip_address(name.split("%", 1)[0])
    except ValueError:
        return name
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_loopback or address.is_unspecified:
        return "this machine"
    return str(address)


def _unique(pairs: list[tuple[str, Any]], source: str) -> dict[str, Any]:
    """A JSON object whose keys are all different: a key given twice is refused, not resolved by
    keeping the last one (which task would that be?)."""
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise UsageProblem(f"{source}: the key {quoted(key, 40)} is given twice in one JSON object")
        found[key] = value
    return found


def _tf_config_only(data: dict[str, Any]) -> bool:
    """A TF_CONFIG's other fields (task, environment, rpc_layer) without its cluster: not a
    ClusterSpec whose jobs happen to be named so (a job lists addresses, or maps indices to them)."""
    task = data.get("task")
    if isinstance(task, dict) and ("type" in task or "index" in task):
        return True
    return any(isinstance(data.get(key), str) for key in ("environment", "rpc_layer", "task"))


def _address(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise UsageProblem(f"{where}: the address must be a string such as \"localhost:2222\"")
    text = value.strip()
    text = text.removeprefix("grpc://")
    match = _ADDRESS.fullmatch(text)
    if match is None or not 0 < int(match["port"]) < 65536:
        raise UsageProblem(f"{where}: {quoted(value, 80)} is not HOST:PORT with a port from 1 to 65535")
    return text


def from_target(target: str) -> str:
    """``grpc://HOST:PORT`` (or ``HOST:PORT``) checked, as ``HOST:PORT``."""
    return _address(target, "target")
