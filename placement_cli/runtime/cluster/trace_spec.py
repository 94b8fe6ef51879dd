"""The cluster `placement trace --cluster` runs: ``--cluster worker=2,ps=1`` or a ``--cluster-spec``
file, checked before any task starts; and the ports of such a file, checked free where no private
network namespace shields them."""

from __future__ import annotations

import contextlib
import errno
import re
import socket
from typing import Any

from placement_cli.exceptions import UsageProblem
from placement_cli.i18n import _
from placement_cli.messages import one_line
from placement_cli.runtime.cluster.launch import loopback

JOBS = ("chief", "worker", "ps")  # TF_CONFIG's order: the coordinator first
MAX_TASKS = {"chief": 1, "worker": 16, "ps": 8}
_SPEC = re.compile(r"\s*([a-z]+)\s*=\s*([0-9]+)\s*")


def _checked(counts: dict[str, int], where: str) -> list[tuple[str, int]]:
    """(job, count) in launch order; ``where`` names what the user gave (``--cluster VALUE``, a file)."""
    for job, count in counts.items():
        if job == "chief" and count != 1:
            raise UsageProblem(_("{where}: there is at most one chief (chief=1, or no chief)").format(where=where))
        if not 1 <= count <= MAX_TASKS[job]:
            raise UsageProblem(_("{where}: {job} takes 1 to {most} tasks ({count} given)").format(
                where=where, job=job, most=MAX_TASKS[job], count=count))
    if "worker" not in counts:
        raise UsageProblem(_("{where}: at least one worker is needed").format(where=where))
    return [(job, counts[job]) for job in JOBS if job in counts]


def parse_cluster(text: str) -> list[tuple[str, int]]:
    """``worker=2,ps=1,chief=1`` as (job, count) in launch order; a usage problem says what is wrong."""
    where = f"--cluster {one_line(text)}"
    counts: dict[str, int] = {}
    for part in text.split(","):
        m = _SPEC.fullmatch(part)
        if m is None or m.group(1) not in JOBS:
            raise UsageProblem(_("{where}: give JOB=COUNT pairs, jobs worker, ps and chief "
                                 "(e.g. worker=2 or chief=1,ps=1,worker=2)").format(where=where))
        job, count = m.group(1), int(m.group(2))
        if job in counts:
            raise UsageProblem(_("{where}: {job} is given twice").format(where=where, job=job))
        counts[job] = count
    return _checked(counts, where)


def jobs_of_spec(spec: Any) -> tuple[list[tuple[str, int]], dict[str, list[str]]]:
    """A --cluster-spec file's cluster (clusterspec.Cluster): loopback addresses only, jobs of this
    command; what is wrong is said of the file."""

    for task in spec.tasks:
        if task.job not in JOBS:
            raise UsageProblem(_("{source}: job {job}: trace --cluster runs jobs worker, ps and chief").format(
                source=spec.source, job=task.job))
        if not loopback(task.host):
            raise UsageProblem(_("{source}: {task} is at {address}: every task runs on this machine, so give "
                                 "localhost, 127.x.x.x or [::1] addresses").format(
                source=spec.source, task=task.name, address=task.address))
    jobs = _checked({job: spec.count(job) for job in JOBS if job in spec.jobs}, one_line(spec.source))
    for job, count in jobs:
        if [t.index for t in spec.jobs[job]] != list(range(count)):
            raise UsageProblem(_("{source}: job {job}'s tasks must be numbered 0 to {last}").format(
                source=spec.source, job=job, last=count - 1))
    return jobs, {job: [t.address for t in spec.jobs[job]] for job, _count in jobs}


def port_in_use(port: int) -> bool:
    """Whether something on this machine (in this network namespace) listens on ``port``, so that a
    TensorFlow server, which binds every interface, could not start there. A socket in TIME_WAIT
    does not count (gRPC binds with SO_REUSEADDR too)."""
    for family, address in ((socket.AF_INET6, "::"), (socket.AF_INET, "0.0.0.0")):  # noqa: S104 - a probe, closed at once
        try:
            probe = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            continue
        with probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                with contextlib.suppress(OSError):
                    probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            try:
                probe.bind((address, port))
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    return True
                continue  # no IPv6 here: the IPv4 wildcard says
            return False
    return False
