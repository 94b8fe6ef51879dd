"""How to proceed after a placement error: a table keyed by the error's kind, whether its colocation
group required a device, and what the command that shows it offers (its messages: messages.py)."""

from __future__ import annotations

from enum import Enum

from placement_cli import messages
from placement_cli.i18n import translated
from placement_cli.model import FailureKind, PlacementFailure
from placement_cli.render.view import Hints


class Advice(Enum):
    """What a hint may name: the program's own fix, now or in a past run's log; or the options of a
    command of placement's lessons, with --soft to offer or without."""

    PROGRAM = "program"  # trace, capture(): the fix is in the program
    LOG = "log"  # parse: a log of a past run
    SOFT = "soft"  # show, tower, ...: --soft exists and was not given
    OPTIONS = "options"  # show, tower, ... given --soft, or a command without it

    @classmethod
    def of(cls, hints: Hints) -> Advice:
        if hints.source == "options":
            return cls.SOFT if hints.soft is False else cls.OPTIONS
        return cls.LOG if hints.source == "log" else cls.PROGRAM


K, A = FailureKind, Advice
_IN_PROGRAM = (A.PROGRAM, A.LOG)
# (kind, its colocation group required a device, advice) -> the hint's messages, said one after another
HINTS: dict[tuple[FailureKind, bool, Advice], tuple[str, ...]] = {
    **{(K.INVALID_DEVICE_SPEC, False, a): (messages.HINT_MALFORMED,) for a in A},
    **{(K.RUN_FAILED, False, a): (messages.HINT_RUN_FAILED,) for a in A},
    **{(K.DEVICE_NOT_FOUND, False, a): (messages.HINT_PIN_EXISTING,) for a in _IN_PROGRAM},
    **{(K.NO_KERNEL, False, a): (messages.HINT_PIN_KERNEL,) for a in _IN_PROGRAM},
    **{(K.COLOCATION, True, a): (messages.HINT_GROUP_VARIABLE,) for a in _IN_PROGRAM},
    (K.COLOCATION, False, A.PROGRAM): (messages.HINT_SHARE_PRESENT,),
    (K.COLOCATION, False, A.LOG): (messages.HINT_SHARE_PAST,),
    **{(K.UNSATISFIABLE, False, a): (messages.HINT_CHANGE_PIN,) for a in _IN_PROGRAM},
    (K.DEVICE_NOT_FOUND, False, A.SOFT): (messages.HINT_NOT_FOUND_SOFT,),
    (K.DEVICE_NOT_FOUND, False, A.OPTIONS): (messages.HINT_NOT_FOUND,),
    (K.NO_KERNEL, False, A.SOFT): (messages.HINT_NO_KERNEL_SOFT,),
    (K.NO_KERNEL, False, A.OPTIONS): (messages.HINT_NO_KERNEL,),
    (K.COLOCATION, True, A.SOFT): (messages.HINT_GROUP, messages.HINT_GROUP_SOFT),
    (K.COLOCATION, True, A.OPTIONS): (messages.HINT_GROUP, messages.HINT_GROUP_PIN),
    (K.COLOCATION, False, A.SOFT): (messages.HINT_APART_SOFT,),
    (K.COLOCATION, False, A.OPTIONS): (messages.HINT_APART,),
    (K.UNSATISFIABLE, False, A.SOFT): (messages.HINT_UNSATISFIABLE_SOFT,),
    (K.UNSATISFIABLE, False, A.OPTIONS): (messages.HINT_UNSATISFIABLE,),
}


def hint(failure: PlacementFailure, hints: Hints) -> str:
    """How to proceed, for this kind of error, naming only what the command offers."""
    advice = Advice.of(hints)
    grouped = failure.kind == FailureKind.COLOCATION and bool(failure.group_device)
    fields = {
        "fix": translated(messages.HINT_FIX).format(soft=translated(messages.HINT_SOFT_IN_PROGRAM)),
        "pins": translated(messages.PINS_PAST if advice is Advice.LOG else messages.PINS_PRESENT),
        "device": failure.group_device.short if failure.group_device else "",
        "cpus": translated(messages.HINT_CPUS) if hints.cpus else "",
    }
    kind = FailureKind(failure.kind) if failure.kind in FailureKind.__members__.values() else FailureKind.UNSATISFIABLE
    return " ".join(translated(template).format(**fields) for template in HINTS[kind, grouped, advice])
