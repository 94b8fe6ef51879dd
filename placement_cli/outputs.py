"""Files the pictures are written to: checked before TensorFlow runs, written whole or not at all.

Also the files ``trace --cluster --save-log DIR`` writes each task's streams to, opened before any task runs.

The rule (as ``trace --save-log``): an existing file is never replaced without ``--force``; a file
is written to a temporary name beside it and then moved into place, so a failed write (a full disk)
never leaves half a picture nor loses the file it would have replaced. A link is followed: the file
it names is the one written, the link stays. A file that is not a regular one (``/dev/null``,
a FIFO, a terminal; ``/dev/stdout`` when the output is a terminal or a pipe) is written into, as a
shell's ``>`` would, never replaced. ``/dev/stdout`` when the output is a regular file is refused:
the picture would replace the tables being written there.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterable
from typing import BinaryIO

from placement_cli.exceptions import UsageProblem
from placement_cli.i18n import _


def not_an_option(option: str, path: str) -> None:
    """``--svg --json`` took ``--json`` as the file's name: a name that starts with - is refused
    (./-x names such a file), so an option typed after a picture option is never a file written."""
    if path.startswith("-"):
        raise UsageProblem(_("{option} {path}: looks like an option, not a file name (give ./{path} for a file "
                             "of that name)").format(option=option, path=path))


def check_file(option: str, path: str, force: bool, protect: Iterable[str] = ()) -> None:
    """Refuse (UsageProblem, exit 2) a FILE that cannot be written: a directory, a missing or
    unwritable folder, an existing file without --force, one of the ``protect`` files (the script)."""
    if not path:
        raise UsageProblem(_("{option}: give a file name").format(option=option))
    not_an_option(option, path)
    if os.path.isdir(path):
        raise UsageProblem(_("{option} {path}: is a directory").format(option=option, path=path))
    if _own_stream(path) is not None:
        # /dev/stdin (or a path to the file it reads) is the command's input; /dev/stdout redirected
        # to a file would be replaced under the tables being written into it
        raise UsageProblem(_("{option} {path}: that is this command's own standard input or output").format(
            option=option, path=path))
    if special(path):  # written into, as a shell's > would: nothing is replaced
        if not os.access(path, os.W_OK):
            raise UsageProblem(_("{option} {path}: cannot write it (permission denied)").format(option=option, path=path))
        return
    # the folder as the system will walk it: "missing/../x" fails there, whatever abspath says
    folder = os.path.dirname(os.path.realpath(path)) if os.path.islink(path) else (os.path.dirname(path) or ".")
    if not os.path.isdir(folder):
        raise UsageProblem(_("{option} {path}: no such directory {folder}").format(option=option, path=path, folder=folder))
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageProblem(_("{option} {path}: cannot write in {folder} (permission denied)").format(
            option=option, path=path, folder=folder))
    name = os.path.basename(os.path.realpath(path))
    if len(os.fsencode(name)) > _name_max(folder):
        raise UsageProblem(_("{option} {path}: the file name is too long").format(option=option, path=path))
    if os.path.lexists(path):
        for other in protect:
            if os.path.exists(path) and os.path.exists(other) and os.path.samefile(path, other):
                raise UsageProblem(_("{option} {path}: that is an input of this command (the script, a log)").format(
                    option=option, path=path))
        if not force:
            raise UsageProblem(_("{option} {path}: the file exists (add --force to overwrite it)").format(option=option, path=path))
        if os.path.exists(path) and not os.access(path, os.W_OK):  # a dangling link's file is made
            raise UsageProblem(_("{option} {path}: cannot overwrite it (permission denied)").format(option=option, path=path))


def check_distinct(named: Iterable[tuple[str, str | None]]) -> None:
    """Two options may not name the same file: the second picture would replace the first."""
    seen: dict[str, str] = {}
    for option, path in named:
        if not path:
            continue
        key = os.path.realpath(path)
        if key in seen:
            raise UsageProblem(_("{first} and {option} both name {path}: give each its own file").format(
                first=seen[key], option=option, path=path))
        seen[key] = option


def check_folder(option: str, path: str) -> str:
    """A folder to write new files in (made when missing): its path, or UsageProblem."""
    if not path:
        raise UsageProblem(_("{option}: give a folder").format(option=option))
    not_an_option(option, path)
    if os.path.lexists(path) and not os.path.isdir(path):
        raise UsageProblem(_("{option} {path}: is not a folder").format(option=option, path=path))
    missing = []  # the folders this makes, deepest last: removed again if the command writes nothing there
    walk = os.path.abspath(path)
    while not os.path.lexists(walk):
        missing.append(walk)
        walk = os.path.dirname(walk)
    try:
        os.makedirs(path, exist_ok=True)
        _made.extend(reversed(missing))
    except OSError as exc:
        raise UsageProblem(_("{option} {path}: cannot make the folder ({why})").format(
            option=option, path=path, why=exc.strerror or exc)) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageProblem(_("{option} {path}: cannot write in it (permission denied)").format(option=option, path=path))
    return path


_made: list[str] = []


def remove_empty_made() -> None:
    """The folders check_folder made that are still empty (a failed or interrupted run wrote nothing
    there): removed, deepest first, so a run leaves no trace it did not mean to."""
    while _made:
        folder = _made.pop()
        try:
            os.rmdir(folder)  # only an empty folder goes
        except OSError:
            pass


def write_file(path: str, text: str, force: bool) -> None:
    """``text`` (UTF-8) into ``path``, whole: through a temporary file beside it (the file a link
    names, beside that file). Without ``force``, a file that appeared meanwhile is kept
    (UsageProblem). A special file (a device, a FIFO) is written into."""
    if special(path):
        with open(path, "w", encoding="utf-8", newline="\n") as out:
            out.write(text)
        return
    if os.path.islink(path):
        path = os.path.realpath(path)  # the link stays a link; a dangling one's file is made
    folder = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(prefix=".placement-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out:
            out.write(text)
        try:  # a file replaced keeps its permissions (a private one stays private)
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except OSError:
            mode = 0o666 & ~_umask()
        os.chmod(temporary, mode)
        if force:
            os.replace(temporary, path)
            return
        try:
            os.link(temporary, path)  # fails if the path exists: nothing is replaced
        except OSError as exc:
            if exc.errno == errno.EEXIST:
                raise UsageProblem(_("{path}: the file appeared meanwhile; kept it (add --force to overwrite it)").format(
                    path=path)) from None
            if os.path.lexists(path):
                raise
            os.replace(temporary, path)  # a file system without hard links
            return
    finally:
        if os.path.lexists(temporary):
            os.unlink(temporary)


def same_as_stdout(path: str) -> bool:
    """``path`` is where this process's standard output goes (a file, a pipe, a terminal)."""
    try:
        here, there = os.stat(path), os.fstat(1)
    except (OSError, ValueError):
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def _own_stream(path: str) -> int | None:
    """0, 1 or 2 when ``path`` is the very file this process reads or writes on that descriptor."""
    try:
        here = os.stat(path)
    except (OSError, ValueError):
        return None
    for fd in (0, 1, 2):
        try:
            there = os.fstat(fd)
        except OSError:
            continue
        if (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino) and stat.S_ISREG(there.st_mode):
            return fd
    return None


def special(path: str) -> bool:
    """An existing file that is neither a regular file nor a folder (followed through links)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def _name_max(folder: str) -> int:
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# trace --cluster --save-log DIR: a file per task and stream

def task_log_folder(path: str) -> str:
    """--save-log DIR: a folder (made if missing) the files of every task go in."""
    not_an_option("--save-log", path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageProblem(_("{option} {path}: with --cluster, give a folder (one file per task and stream goes in "
                             "it)").format(option="--save-log", path=path))
    return check_folder("--save-log", path)


def open_task_logs(folder: str, jobs: list[tuple[str, int]], script: str,
               force: bool) -> tuple[dict[str, dict[str, BinaryIO]], list[str]]:
    """Every task's --save-log files, checked as every output file is and opened before any task
    starts: a file that cannot be written is a usage error naming it (nothing has run). Files
    replaced under --force are emptied only once every one is open. Also: the files this made."""
    paths = {(f"{job}/{i}", kind): os.path.join(folder, f"{job}-{i}.{kind}")
             for job, count in jobs for i in range(count) for kind in ("log", "out", "err")}
    for path in paths.values():
        check_file("--save-log", path, force, protect=(script,))
    opened: dict[str, dict[str, BinaryIO]] = {}
    made: list[str] = []
    path = ""
    try:
        for (task, kind), path in paths.items():
            not_regular = special(path)
            existed = os.path.lexists(path)
            flags = os.O_WRONLY | os.O_CLOEXEC | (0 if not_regular else os.O_CREAT | (0 if force else os.O_EXCL))

            def opener(name: str, _flags: int, how: int = flags) -> int:
                return os.open(name, how, 0o666)

            file: BinaryIO = open(path, "wb", opener=opener)  # noqa: SIM115
            if not existed:
                made.append(path)
            opened.setdefault(task, {})[kind] = file
    except OSError as exc:
        for files in opened.values():
            for file in files.values():
                file.close()
        remove(made)
        raise UsageProblem(_("{option} {path}: cannot write it ({why})").format(
            option="--save-log", path=path, why=exc.strerror or exc)) from None
    for files in opened.values():
        for file in files.values():
            with contextlib.suppress(OSError):  # a FIFO, a device: written into as it is
                os.ftruncate(file.fileno(), 0)
    return opened, made


def remove(paths: Iterable[str]) -> None:
    """The files this run made, gone again (nothing ran that would have written them)."""
    for path in paths:
        with contextlib.suppress(OSError):
            os.unlink(path)


def open_save_log(path: str, script: str, force: bool) -> BinaryIO:
    """The --save-log file, opened before the script runs: never a directory, never an existing
    file without --force, never the script itself. A file that is not a regular one (/dev/null, a
    FIFO, a terminal) is written into, as the pictures are, and needs no --force."""
    not_an_option("--save-log", path)
    if os.path.isdir(path):
        raise UsageProblem(_("{option} {path}: is a directory").format(option="--save-log", path=path))
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageProblem(_("{option} {path}: no such directory {folder}").format(option="--save-log", path=path, folder=folder))
    not_regular = special(path)
    if os.path.lexists(path) and not not_regular:
        if os.path.exists(path) and os.path.samefile(path, script):
            raise UsageProblem(_("{option} {path}: that is the script itself").format(option="--save-log", path=path))
        if not force:
            raise UsageProblem(_("{option} {path}: the file exists (add --force to overwrite it)").format(option="--save-log", path=path))
    flags = os.O_WRONLY | os.O_CLOEXEC | (0 if not_regular else os.O_CREAT | (os.O_TRUNC if force else os.O_EXCL))
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:
        raise UsageProblem(_("{option} {path}: cannot write it ({why})").format(option="--save-log", path=path, why=exc.strerror)) from None
    return os.fdopen(fd, "wb")
