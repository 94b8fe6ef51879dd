"""`placement cluster`: a ps/worker run, one process per task; the supervisor's answer, then the report
made of it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from placement_cli.i18n import Wording, english
from placement_cli.model.cause import Cause
from placement_cli.model.copies import Copy
from placement_cli.model.fields import count, number, optional_int, optional_text, text
from placement_cli.model.report import Report

if TYPE_CHECKING:
    from placement_cli.model.cost import Cost, Profile

_TASK_FIELDS = ("job", "task", "target", "pid", "exit_code", "ended_by_placement", "private_kib", "steps_reported",
                "cuda_visible_devices", "tf_force_gpu_allow_growth", "gpu_options")


@dataclass(frozen=True)
class ClusterEvent:
    """One event of a cluster's start-up as its supervisor reports it: a task started, was ready or
    opened its session, the ports were retried, the network isolation was (not) had."""

    event: str
    task: str | None = None
    address: str | None = None
    pid: int | None = None
    seconds: float | None = None
    isolated: bool | None = None
    why: str | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClusterEvent:
        return cls(str(data.get("event")), **{name: data.get(name) for name in
                                              ("task", "address", "pid", "seconds", "isolated", "why")})


@dataclass(frozen=True)
class ClusterTask:
    """One task of a cluster run, as its supervisor saw it (None: not known)."""

    job: str
    task: int
    target: str | None = None  # grpc://HOST:PORT
    pid: int | None = None
    exit_code: int | None = None  # negative: the signal that killed it
    ended_by_placement: bool | None = None  # placement killed it at the end (a server never stops itself)
    private_kib: int | None = None
    steps_reported: int | None = None  # TF1's workers: the steps it said it had run, by its heartbeats
    cuda_visible_devices: str | None = None  # as the task had it (None: not set, every GPU visible)
    tf_force_gpu_allow_growth: str | None = None  # as the task had it (None: not set)
    gpu_options: Any = None  # the ConfigProto fields its server ran with ({"allow_growth": True}), as it said

    @property
    def name(self) -> str:
        return f"{self.job}/{self.task}"

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _TASK_FIELDS}

    @classmethod
    def from_dict(cls, t: Any) -> ClusterTask:
        return cls(job=text(t["job"]), task=count(t["task"]), **{name: t.get(name) for name in _TASK_FIELDS
                                                                   if name not in ("job", "task")})


@dataclass(frozen=True)
class GpuMemory:
    """How the processes of a cluster placement started share a GPU (runtime.gpu_policy decides)."""

    policy: str  # asked for: growth, share or whole
    allow_growth: bool  # what TensorFlow does: the user's TF_FORCE_GPU_ALLOW_GROWTH wins over the policy
    memory_fraction: float | None = None  # share: each process's per_process_gpu_memory_fraction
    your_allow_growth: str | None = None  # TF_FORCE_GPU_ALLOW_GROWTH as the user set it (kept as it is)
    ps_on_gpu: bool = False  # False: ps tasks see no GPU (CUDA_VISIBLE_DEVICES="")

    @property
    def overridden(self) -> bool:
        """The user's TF_FORCE_GPU_ALLOW_GROWTH decides otherwise than the policy asked."""
        return self.your_allow_growth is not None and self.policy != "share" \
            and self.allow_growth != (self.policy == "growth")  # share: a cap either way

    def to_dict(self) -> dict[str, Any]:
        return {"policy": self.policy, "allow_growth": self.allow_growth, "memory_fraction": self.memory_fraction,
                "your_allow_growth": self.your_allow_growth, "ps_on_gpu": self.ps_on_gpu}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> GpuMemory | None:
        if not isinstance(data, dict) or not isinstance(data.get("policy"), str):
            return None
        return cls(data["policy"], bool(data.get("allow_growth")), data.get("memory_fraction"),
                   data.get("your_allow_growth"), bool(data.get("ps_on_gpu")))


@dataclass(frozen=True)
class TaskTraining:
    """What one training task reported at its end (TF1: a worker; TF2: the coordinator)."""

    losses: tuple[float, ...] = ()
    global_steps: tuple[int, ...] = ()  # the global step each of its steps read
    variables: tuple[tuple[str, str], ...] = ()  # (variable, the device it lives on)
    copies: tuple[Copy, ...] = ()  # what its first step copied between tasks (--copies)
    edges: tuple[tuple[str, str, bool], ...] = ()  # its graph: (producer, consumer, control)
    profile: Profile | None = None  # --time: its measured steps, as TensorFlow's profiler saw them
    timing_error: str | None = None  # --time: why it has no profile


@dataclass(frozen=True)
class ClusterRun:
    """What the supervisor said: the tasks, each trainer's training, each task's log; problem when it failed."""

    isolated: bool | None = None  # None: not known (the supervisor ended before it said)
    isolation_note: str = ""
    tasks: tuple[ClusterTask, ...] = ()
    results: tuple[tuple[str, TaskTraining], ...] = ()  # by task name ("worker/0"), in task order
    logs: tuple[tuple[str, str], ...] = ()  # each task's stderr (glog: where its placements are)
    problem: Any = None  # a str or an i18n.Message, shown in the user's language; ``error`` is its English
    seconds: float | None = None
    start_method: str | None = None
    cluster: tuple[tuple[str, tuple[str, ...]], ...] = ()  # job -> addresses
    own_failure: bool = False  # placement's own supervisor failed (crashed, killed), not the cluster
    cause: Cause | None = None  # the failed task's cause in TensorFlow's words (and its log's GPU line)
    gpu_memory: GpuMemory | None = None  # how its processes shared a GPU

    @property
    def error(self) -> str | None:
        problem: Wording | None = self.problem
        return english(problem)  # English, as JSON and the report's run_error write it

    def result(self, task: str) -> TaskTraining | None:
        return next((training for name, training in self.results if name == task), None)

    def log(self, task: str) -> str | None:
        return next((text for name, text in self.logs if name == task), None)

    @property
    def workers(self) -> tuple[ClusterTask, ...]:
        return tuple(t for t in self.tasks if t.job == "worker")


@dataclass(frozen=True)
class WorkerSteps:
    """What one worker ran. None: not known (it never reported), which is not nothing (0)."""

    task: int
    steps: int | None
    losses: tuple[float, ...] | None = None  # TF1 only: TF2's losses are the coordinator's
    global_steps: tuple[int, ...] | None = None
    steps_reported: int | None = None  # where not known: what it said before it ended
    api: str = "tf1"
    known: bool = True  # its result came

    def to_dict(self) -> dict[str, Any]:
        if self.api == "tf2":
            if self.known:
                return {"task": self.task, "steps": self.steps}
            return {"task": self.task, "steps": None, "steps_reported": self.steps_reported}
        if not self.known:
            return {"task": self.task, "steps": None, "losses": None, "global_steps": None,
                    "steps_reported": self.steps_reported}
        return {"task": self.task, "steps": self.steps, "losses": list(self.losses or ()),
                "global_steps": list(self.global_steps or ())}

    @classmethod
    def from_dict(cls, w: Any, api: str = "tf1") -> WorkerSteps:
        """A worker as JSON has it (``api``: the run's, which the worker's JSON does not repeat)."""
        steps = optional_int(w.get("steps"))
        losses, global_steps = w.get("losses"), w.get("global_steps")
        return cls(task=count(w["task"]), steps=steps,
                   losses=None if losses is None else tuple(map(number, losses)),
                   global_steps=None if global_steps is None else tuple(map(count, global_steps)),
                   steps_reported=optional_int(w.get("steps_reported")), api=api, known=steps is not None)


@dataclass(frozen=True)
class ClusterReport:
    """`placement cluster`: the run, its placements by task, and how the workers trained."""

    run: ClusterRun
    report: Report
    sync: bool
    steps: int
    api: str = "tf1"
    graph: Report | None = None  # for --dot and --graph-svg: node names qualified by the task they ran on
    scheduled: tuple[tuple[int, int], ...] = ()  # TF2: (worker task, steps the coordinator's log sent it)
    workers: tuple[WorkerSteps, ...] = ()
    sync_ops: tuple[tuple[str, int], ...] = ()  # SyncReplicasOptimizer's op types the graphs placed, counted
    costs: tuple[tuple[str, Cost], ...] | None = None  # --time: each worker's measured steps ("worker/0", ...)
    timing_errors: tuple[tuple[str, str], ...] = ()  # --time: the workers that have no times, and why

    @property
    def mode(self) -> str:
        return "sync" if self.sync else "async"

    @property
    def complete(self) -> bool:
        expected = 1 if self.api == "tf2" else len(self.run.workers)
        return self.run.error is None and bool(self.run.workers) and len(self.run.results) == expected

    @property
    def variables(self) -> dict[str, str]:
        found: dict[str, str] = {}
        for _, training in self.run.results:
            found.update(training.variables)
        return dict(sorted(found.items()))

    def to_dict(self) -> dict[str, Any]:
        data = self.report.to_dict()
        data.update(
            mode=self.mode,
            api=self.api,
            steps_asked=self.steps,
            tasks=[t.to_dict() for t in self.run.tasks],
            isolated=self.run.isolated,
            variables=self.variables,
            workers=[w.to_dict() for w in self.workers],
            sync_ops=dict(self.sync_ops),
            complete=self.complete,
            error=self.run.error,
            seconds=self.run.seconds,
            gpu_memory=None if self.run.gpu_memory is None else self.run.gpu_memory.to_dict(),
        )
        if self.run.cause is not None:
            data["cause"] = self.run.cause.to_dict()
        if self.costs is not None:
            data["costs"] = {task: cost.to_dict() for task, cost in self.costs}
            data["timing_errors"] = dict(self.timing_errors)
        if self.api == "tf2":
            chief = self.run.result("chief/0")
            data.update(losses=None if chief is None else list(chief.losses),
                        global_steps=None if chief is None else list(chief.global_steps))
        return data

    @classmethod
    def from_dict(cls, data: Any) -> ClusterReport:
        """A cluster run as its JSON has it. The JSON holds no task's own results, only what follows from
        them (each worker's steps, the variables, complete): the run read back holds results that give
        the same (TF1: one per worker that reported, the variables with the first; TF2: the chief's)."""
        api = text(data.get("api", "tf1"))
        workers = tuple(WorkerSteps.from_dict(w, api) for w in data.get("workers") or ())
        variables = tuple((text(k), text(v)) for k, v in (data.get("variables") or {}).items())
        results: tuple[tuple[str, TaskTraining], ...]
        if api == "tf2":
            losses = data.get("losses")
            results = () if losses is None else (("chief/0", TaskTraining(
                tuple(map(number, losses)), tuple(map(count, data.get("global_steps") or ())), variables)),)
        else:
            results = tuple((f"worker/{w.task}", TaskTraining(tuple(w.losses or ()), tuple(w.global_steps or ()),
                                                              variables if i == 0 else ()))
                            for i, w in enumerate(x for x in workers if x.known))
        cause = data.get("cause")
        run = ClusterRun(isolated=data.get("isolated"), tasks=tuple(map(ClusterTask.from_dict, data.get("tasks") or ())),
                         results=results, problem=optional_text(data.get("error")),
                         seconds=None if data.get("seconds") is None else number(data["seconds"]),
                         cause=None if cause is None else Cause.from_dict(cause),
                         gpu_memory=GpuMemory.from_dict(data.get("gpu_memory")))
        costs = None
        if data.get("costs") is not None:  # a timed cluster's
            from placement_cli.model.cost import Cost  # noqa: PLC0415 - start-up: only a timed report needs it

            costs = tuple((text(k), Cost.from_dict(v)) for k, v in data["costs"].items())
        return cls(run=run, report=Report.from_dict(data), sync=data.get("mode") == "sync",
                   steps=count(data["steps_asked"]), api=api, workers=workers,
                   sync_ops=tuple((text(k), count(v)) for k, v in (data.get("sync_ops") or {}).items()),
                   costs=costs,
                   timing_errors=tuple((text(k), text(v)) for k, v in (data.get("timing_errors") or {}).items()))
