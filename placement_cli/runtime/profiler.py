"""TensorFlow's profiler around measured steps, and its ``.xplane.pb`` read as a Profile.

Measured (TF 2.21, CPU): the ``/host:CPU`` plane holds a line per thread. The Python thread has the
roots: ``SessionRun`` (stat ``id``: the step id), ``EagerLocalExecute: __inference_f_13`` (a tf.function
call) holding one ``FunctionRun`` per partition (stat ``id``: the call's step id), ``EagerLocalExecute:
MatMul`` (an eager op) with ``_Send input N from DEV to DEV`` for each input it copied. The executor's
``tf_Compute`` threads hold ``ExecutorState::Process`` (stat ``id``: the step id) and inside it one event
per kernel named ``node:op`` (``MatMul:_MklMatMul``, ``a/_1:_Send``) with no device; a ``_Send``'s stats
``from``/``to`` name the producer and consumer and its ``key`` is the rendezvous key
``SRC_DEVICE;INCARNATION;DST_DEVICE;EDGE;FRAME``. On a GPU, planes ``/device:GPU:N`` hold the kernels
and memcpys, each with a ``tf_op`` stat (``node:op``) naming the op that launched it (TensorFlow's
xplane schema); their device is the plane's.
"""

from __future__ import annotations

import bisect
import glob
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from placement_cli.devices import DeviceName
from placement_cli.model.caps import MAX_STEPS
from placement_cli.model.cost import COPY, EAGER, FUNCTION, SESSION, Profile, ProfiledEvent, ProfiledRun

STEP_MARK = "placement_step"  # the name a lesson's measured steps run under (a profiler TraceMe)
_EAGER_COPY = re.compile(r"^_Send input (\d+) from (\S+) to (\S+)$")
_KERNEL = re.compile(r"^[^\s:]+:[A-Za-z0-9_>.]+$")  # ``node:op``: a node's name has no space, no colon
_ANNOTATION = re.compile(r"#.*$")  # ``node:op#id=1,...#``: the metadata TensorFlow appends to a tf_op


def _xplane_module() -> Any:
    """TensorFlow's XSpace protobuf module (its home moved between versions)."""
    try:
        from tensorflow.tsl.profiler.protobuf import xplane_pb2  # noqa: PLC0415 - TensorFlow's, only when timed
    except ImportError:
        from tsl.profiler.protobuf import xplane_pb2  # type: ignore[import-not-found]  # noqa: PLC0415
    return xplane_pb2


@dataclass
class Profiling:
    """A profiler session's outcome: where its files are, and how long starting and stopping took."""

    logdir: str
    owned: bool = True  # a folder of its own (removed with its files), else the caller's (emptied)
    collect: float = 0.0  # seconds spent starting, stopping and reading
    error: str | None = None  # why no profile came (another profiler was running, TensorFlow refused)

    def remove(self) -> None:
        """Its files gone (the folder too, where it made it)."""
        shutil.rmtree(self.logdir, ignore_errors=True)
        if not self.owned:
            os.makedirs(self.logdir, exist_ok=True)


FOLDER_PREFIX = "placement-profile-"


def new_folder() -> str:
    """A private folder for a profile, named after this process: a later run removes the folders of
    processes that no longer run (a placement killed with SIGKILL could not)."""
    for stale in glob.glob(os.path.join(tempfile.gettempdir(), f"{FOLDER_PREFIX}*-*")):
        pid = os.path.basename(stale)[len(FOLDER_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)
    return tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{os.getpid()}-")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's: alive
        return True
    return True


def _refused(exc: BaseException) -> str:
    if type(exc).__name__ == "AlreadyExistsError":
        return "TensorFlow's profiler was already running (the program's own, or another timed run in this process)"
    return f"{type(exc).__name__}: {exc}"


@contextmanager
def profiling(tf: Any, start: Any = None, stop: Any = None, logdir: str | None = None) -> Iterator[Profiling]:
    """TensorFlow's profiler on around the block (``start``/``stop``: TensorFlow's own functions, where the
    program's were replaced), its files in a private folder (or ``logdir``): removed by ``read``, or at
    once where the profiler did not start or the block was interrupted."""
    start = start or tf.profiler.experimental.start
    stop = stop or tf.profiler.experimental.stop
    found = Profiling(logdir or new_folder(), owned=logdir is None)
    began = time.perf_counter()
    started = False
    try:
        start(found.logdir)
        started = True
    except Exception as exc:  # noqa: BLE001 - a profiler already running (the program's own): no profile
        found.error = _refused(exc)
        found.remove()
    found.collect += time.perf_counter() - began
    ended = False
    try:
        yield found
        ended = True
    finally:
        if started:
            began = time.perf_counter()
            try:
                stop()
            except Exception as exc:  # noqa: BLE001 - kept, said in the report
                found.error = f"{type(exc).__name__}: {exc}"
            found.collect += time.perf_counter() - began
        if not ended or found.error is not None:  # interrupted, or nothing to read: nothing left behind
            found.remove()


def read(found: Profiling, *, warmup: int = 0, steps: int = MAX_STEPS, plain_walls: tuple[float, ...] = (),
         sizes: Callable[[str | None, str, str], int | None] | None = None) -> Profile | None:
    """The profile a session wrote (None where it wrote none), its folder removed."""
    began = time.perf_counter()
    try:
        files = sorted(glob.glob(os.path.join(found.logdir, "**", "*.xplane.pb"), recursive=True))
        if not files:
            return None
        space = _xplane_module().XSpace()
        with open(files[-1], "rb") as f:
            space.ParseFromString(f.read())
        runs, events, marked = read_space(space)
    finally:
        found.remove()
    if sizes is not None:
        events = [_sized(e, runs, sizes) for e in events]
    return Profile(tuple(runs), tuple(events), plain_walls, found.collect + time.perf_counter() - began, warmup,
                   tuple(marked), steps)


def collect(found: Profiling, **read_as: Any) -> tuple[Profile | None, str | None]:
    """A stopped session's profile (``read``'s arguments), or why there is none."""
    if found.error is not None:
        return None, found.error
    profile = read(found, **read_as)
    return (profile, None) if profile is not None else (None, "TensorFlow's profiler wrote no profile")


def _sized(event: ProfiledEvent, runs: list[ProfiledRun], sizes: Callable[[str | None, str, str], int | None]) -> ProfiledEvent:
    if event.kind != COPY or event.bytes is not None or not event.producer or not event.consumer:
        return event
    graph = runs[event.run].graph if event.run is not None and runs[event.run].kind != EAGER else None
    size = sizes(graph, event.producer, event.consumer)
    return event if size is None else replace(event, bytes=size)


@dataclass
class _Raw:
    name: str
    start: int  # picoseconds, on the profile's clock
    end: int
    stats: dict[str, Any]


def _events(plane: Any, line: Any) -> list[_Raw]:
    base = line.timestamp_ns * 1000
    meta, stat_meta = plane.event_metadata, plane.stat_metadata
    found = []
    for e in line.events:
        stats = {}
        for s in e.stats:
            name = stat_meta[s.metadata_id].name
            which = s.WhichOneof("value")
            stats[name] = stat_meta[s.ref_value].name if which == "ref_value" else getattr(s, which) if which else None
        start = base + e.offset_ps
        found.append(_Raw(meta[e.metadata_id].name, start, start + e.duration_ps, stats))
    found.sort(key=lambda r: r.start)
    return found


def read_space(space: Any) -> tuple[list[ProfiledRun], list[ProfiledEvent], list[tuple[float, float]]]:
    """The runs, timed events and marked steps (start, duration) of an XSpace, in microseconds from its
    first run or mark."""
    host = next((p for p in space.planes if p.name == "/host:CPU"), None)
    if host is None:
        return [], [], []
    lines = [(line.name, _events(host, line)) for line in host.lines]
    roots: list[tuple[int, int, str, str | None, _Raw]] = []  # (start, end, kind, graph, event)
    step_of: dict[int, int] = {}  # step id -> root index (filled after sorting)
    pending: list[tuple[int, int]] = []  # (root's start, step id)
    eager_copies: list[_Raw] = []
    marks: list[_Raw] = []
    for _name, events in lines:
        functions: list[_Raw] = []
        called_at: list[int] = []
        for r in events:
            if r.name == STEP_MARK:
                marks.append(r)
            elif r.name == "SessionRun" and "id" in r.stats:
                roots.append((r.start, r.end, SESSION, None, r))
                pending.append((r.start, int(r.stats["id"])))
            elif r.name.startswith("EagerLocalExecute: "):
                called = r.name[len("EagerLocalExecute: "):]
                kind = FUNCTION if called.startswith(("__inference_", "__forward_", "__backward_")) else EAGER
                if not _inside(functions, r, called_at):  # an op inside a function's call is no root of its own
                    roots.append((r.start, r.end, kind, called, r))
                    functions.append(r)
                    called_at.append(r.start)
            elif r.name == "FunctionRun" and "id" in r.stats:
                owner = _inside(functions, r, called_at)
                if owner is not None:
                    pending.append((owner.start, int(r.stats["id"])))
            elif _EAGER_COPY.match(r.name):
                eager_copies.append(r)
    roots.sort(key=lambda t: t[0])
    marks.sort(key=lambda r: r.start)
    if not roots and not marks:  # (a Session on a remote master shows no run of its own: its marks do)
        return [], [], []
    origin = min([*(t[0] for t in roots[:1]), *(m.start for m in marks[:1])])
    starts = [t[0] for t in roots]
    for start, step in pending:
        step_of.setdefault(step, bisect.bisect_left(starts, start))
    runs = [ProfiledRun(kind, graph, (start - origin) / 1e6, (end - start) / 1e6) for start, end, kind, graph, _ in roots]
    found: list[ProfiledEvent] = []

    def at(start: int) -> int | None:
        i = bisect.bisect_right(starts, start) - 1
        return i if i >= 0 else None

    for _name, events in lines:  # an executor's threads; a small graph runs inline on the caller's
        windows = [r for r in events if r.name == "ExecutorState::Process" and "id" in r.stats]
        starts_of = [w.start for w in windows]
        for r in events:
            if not _KERNEL.match(r.name):
                continue
            window = _inside(windows, r, starts_of)
            run = step_of.get(int(window.stats["id"])) if window is not None else None
            found.append(_event(r, run, origin))
    for r in eager_copies:  # an eager op's input copy: under that op's run
        m = _EAGER_COPY.match(r.name)
        assert m is not None
        run = at(r.start)
        consumer = runs[run].graph if run is not None else None
        found.append(ProfiledEvent(run, consumer or "", "_Send", (r.start - origin) / 1e6, (r.end - r.start) / 1e6,
                                   COPY, DeviceName(m.group(2)), DeviceName(m.group(3)), None, consumer))
    for plane in space.planes:  # a GPU's kernels and memcpys, each with the op that launched it
        name = DeviceName(plane.name)  # "/device:GPU:0"
        if name.spec is None or name.spec.device_type not in ("GPU", "XLA_GPU") or name.spec.device_index is None:
            continue
        for line in plane.lines:
            for r in _events(plane, line):
                tf_op = r.stats.get("tf_op")
                if not isinstance(tf_op, str) or ":" not in tf_op:
                    continue
                node, _, op = _ANNOTATION.sub("", tf_op).partition(":")
                memcpy = r.name.startswith("Memcpy")
                found.append(ProfiledEvent(at(r.start), node, r.name if memcpy else op, (r.start - origin) / 1e6,
                                           (r.end - r.start) / 1e6, COPY if memcpy else "op", name,
                                           producer=node if memcpy else None))
    found.sort(key=lambda e: e.start)
    return runs, found, [((m.start - origin) / 1e6, (m.end - m.start) / 1e6) for m in marks]


def _inside(windows: list[_Raw], r: _Raw, starts: list[int]) -> _Raw | None:
    """The innermost of ``windows`` (one thread's, by start; ``starts`` theirs) that holds ``r``."""
    last = bisect.bisect_right(starts, r.start) - 1
    for i in range(last, max(-1, last - 64), -1):  # windows nest a few deep, never thousands
        w = windows[i]
        if w.end >= r.end and w is not r:
            return w
    return None


def _event(r: _Raw, run: int | None, origin: int) -> ProfiledEvent:
    node, _, op = r.name.partition(":")
    start, duration = (r.start - origin) / 1e6, (r.end - r.start) / 1e6
    if op != "_Send":
        return ProfiledEvent(run, node, op, start, duration)
    key = str(r.stats.get("key") or "").split(";")
    source = DeviceName(key[0]) if len(key) > 2 and key[0] else None
    target = DeviceName(key[2]) if len(key) > 2 and key[2] else None
    producer, consumer = r.stats.get("from"), r.stats.get("to")
    return ProfiledEvent(run, node, op, start, duration, COPY, source, target,
                         producer if isinstance(producer, str) else None, consumer if isinstance(consumer, str) else None)
