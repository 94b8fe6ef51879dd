"""What `placement check` found: each rule that failed, and the placements the rules judged."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from placement_cli.i18n import Wording, english
from placement_cli.model.fields import count, optional_int, optional_text, text


@dataclass(frozen=True)
class RuleFailure:
    """One rule that did not hold."""

    rule: str  # the rule as the command line writes it: "--max-on CPU=0", "--expect ^tower_0/=GPU:0"
    message: Wording  # a Message: JSON writes its English, the table the chosen language
    examples: tuple[str, ...] = ()  # up to five nodes that broke it (an eager op, which has no name: its op)

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "message": english(self.message), "examples": list(self.examples)}

    @classmethod
    def from_dict(cls, f: Any) -> RuleFailure:
        """A failed rule as JSON has it: its message as its English."""
        return cls(text(f["rule"]), text(f["message"]), tuple(map(text, f.get("examples") or ())))


@dataclass(frozen=True)
class CheckResult:
    """Every rule judged against one input."""

    rules: tuple[str, ...]  # every rule judged, as the command line writes it
    failures: tuple[RuleFailure, ...]
    placements: int  # the placements the rules judged (TensorFlow's plumbing and what was ignored left out)
    by_device: tuple[tuple[str, int], ...]  # canonical device -> placements judged, most first
    soft_fallbacks: int | None  # None: the input does not know what was requested (a log)
    plumbing: int  # placements of TensorFlow's plumbing, not judged (0 with include_plumbing)
    ignored: int  # placements --ignore and --ignore-op left out
    errors: int  # placement errors the input reports
    config: str | None = None  # the file rules were read from
    unknown_requests: int = 0  # judged placements whose request no record says (eager ops of other threads)
    # what those are, by kind: "eager_const" (TensorFlow's own constants), "wrapper" (nodes of the
    # single-op functions TF wraps eager ops in), "eager" (eager ops no record joined), "graph" (nodes of
    # no recorded graph: TensorFlow's own, such as lowered control flow)
    unknown_kinds: tuple[tuple[str, int], ...] = ()
    # the distinct placements judged, each (node, op type, device) once: an eager op is logged every time
    # it runs, so ``placements`` grows with the steps; this does not (what --max-on counts)
    distinct: int | None = None
    distinct_by_device: tuple[tuple[str, int], ...] = ()
    repeats: tuple[tuple[str, int], ...] = ()  # logged beyond ``distinct``, by kind: "eager", "graph"
    xla_moved: int = 0
    plumbing_fallbacks: int = 0  # soft fallbacks of TensorFlow's plumbing, left out with it (not judged)  # ops of XLA-compiled functions that asked for a device their cluster did not run on

    @property
    def passed(self) -> bool:
        return not self.failures

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "failures": [f.to_dict() for f in self.failures],
            "summary": {
                "placements": self.placements,
                "by_device": dict(self.by_device),
                "distinct": self.placements if self.distinct is None else self.distinct,
                "distinct_by_device": dict(self.distinct_by_device or self.by_device),
                "repeats": dict(self.repeats),
                "xla_compiled_moved": self.xla_moved,
                "soft_fallbacks": self.soft_fallbacks,
                "plumbing_soft_fallbacks": self.plumbing_fallbacks,
                "unknown_requests": self.unknown_requests,
                "unknown_request_kinds": dict(self.unknown_kinds),
                "left_out": {"plumbing": self.plumbing, "ignored": self.ignored},
                "errors": self.errors,
                "rules": list(self.rules),
                "failed": len(self.failures),
                "config": self.config,
            },
        }

    @classmethod
    def from_dict(cls, data: Any) -> CheckResult:
        """A check's result as its JSON has it (``passed`` and ``failed`` follow from the failures)."""
        s = data["summary"]

        def counts(found: Any) -> tuple[tuple[str, int], ...]:
            return tuple((text(k), count(v)) for k, v in (found or {}).items())

        return cls(rules=tuple(map(text, s["rules"])), failures=tuple(map(RuleFailure.from_dict, data["failures"])),
                   placements=count(s["placements"]), by_device=counts(s["by_device"]),
                   soft_fallbacks=optional_int(s.get("soft_fallbacks")), plumbing=count(s["left_out"]["plumbing"]),
                   ignored=count(s["left_out"]["ignored"]), errors=count(s["errors"]),
                   config=optional_text(s.get("config")), unknown_requests=count(s.get("unknown_requests", 0)),
                   unknown_kinds=counts(s.get("unknown_request_kinds")), distinct=count(s["distinct"]),
                   distinct_by_device=counts(s.get("distinct_by_device")), repeats=counts(s.get("repeats")),
                   xla_moved=count(s.get("xla_compiled_moved", 0)),
                   plumbing_fallbacks=count(s.get("plumbing_soft_fallbacks", 0)))
