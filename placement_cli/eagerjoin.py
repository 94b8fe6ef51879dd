"""Which recorded eager op each eager line of TensorFlow's log is: the op callback's records joined
to the log's ``Executing op`` lines thread by thread (the thread the parser read off each line), where
certain."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from placement_cli.model import Placement
from placement_cli.model.kinds import PlacementKind
from placement_cli.model.ops import onednn_base
from placement_cli.tfrules import EagerRecord

# Made by TensorFlow's C++ as a Python value becomes a tensor: logged, never seen by an op callback.
_UNRECORDED = frozenset({"_EagerConst"})
# Ops that run the program's Python, whose eager ops are recorded before the op that ran them (its
# record comes when it ends): left out of the pairing, their own requests unknown.
_NESTING = frozenset({"EagerPyFunc", "PyFunc", "PyFuncStateless"})


def eager_records(placements: Iterable[Placement], recorded: Mapping[str, Any]) -> dict[int, EagerRecord]:
    """Line -> the record of the op that ran it, for each eager line joined to one.

    A thread's eager lines (the parser records the thread absl's prefix names) and its records are in
    the same order: the record is made right after the op's line is written, in the same thread. A
    line may have no record (an op that failed after it was logged, such as the IteratorGetNext that
    ends a dataset loop; the program's removing the callback), so a thread's records are paired with a
    subsequence of its lines, oneDNN's renames (``_MklMatMul``) standing for the op the program ran. A
    record takes a line only where every such pairing gives it that line (its earliest and its latest
    possible line agree); a line it could share with another of its op type stays unknown. Where the
    records are no subsequence of the lines (an op recorded without a line), they are paired one to
    one only up to the first pair whose op types differ. Lines without a thread id (TensorFlow's
    listener in a notebook) are joined only where one thread alone recorded ops and no line has one."""
    try:
        pairs = [EagerRecord(*(str(field) for field in pair[:5])) for pair in recorded["pairs"]]
        threads = {int(tid): found for tid, found in recorded["threads"].items()}
    except (KeyError, TypeError, ValueError, AttributeError):
        return {}
    by_thread: dict[int | None, list[Placement]] = {}
    for p in sorted(placements, key=lambda p: p.line):
        if p.kind == PlacementKind.EAGER and p.op and p.op not in _UNRECORDED and p.op not in _NESTING:
            by_thread.setdefault(p.thread, []).append(p)
    found: dict[int, EagerRecord] = {}
    for thread, lines in by_thread.items():
        if thread is None:
            indices = next(iter(threads.values())) if len(threads) == 1 and len(by_thread) == 1 else None
        else:
            indices = threads.get(thread)
        if not indices or not all(isinstance(i, int) and 0 <= i < len(pairs) for i in indices):
            continue
        logged = [onednn_base(p.op or "") or p.op or "" for p in lines]
        kept = [i for i in indices if pairs[i].op not in _NESTING]
        for at, i in _pairing(logged, [pairs[i].op for i in kept]).items():
            found[lines[at].line] = pairs[kept[i]]
    return found


def _pairing(logged: list[str], ran: list[str]) -> dict[int, int]:
    """Line position -> record position, for each record whose line is certain (see eager_records)."""
    earliest: list[int] = []
    at = 0
    for op in ran:
        while at < len(logged) and logged[at] != op:
            at += 1
        if at == len(logged):  # not a subsequence: one to one, up to the first disagreement
            pairs = {}
            for i, (line_op, op_ran) in enumerate(zip(logged, ran)):
                if line_op != op_ran:
                    break
                pairs[i] = i
            return pairs
        earliest.append(at)
        at += 1
    latest = [0] * len(ran)
    at = len(logged) - 1
    for i in range(len(ran) - 1, -1, -1):
        while logged[at] != ran[i]:  # found: the earliest pairing exists, so a latest one does
            at -= 1
        latest[i] = at
        at -= 1
    return {first: i for i, (first, last) in enumerate(zip(earliest, latest)) if first == last}
