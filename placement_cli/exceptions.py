"""Every domain error the CLI turns into an exit code: 2 for usage and input, 128 + N for a signal,
3 for placement's own helper process failing (the funnel in the CLI is the one place that maps them)."""

import signal


class InputError(Exception):
    """Input that is not a readable text log (exit 2)."""


class UsageProblem(Exception):
    """A run option that cannot work on this machine (exit 2)."""


class DeviceSpecError(ValueError):
    """A device string TensorFlow would not accept (exit 2)."""


class FilterError(ValueError):
    """A filter value that cannot be used: empty, a bad regex, no device or op type (exit 2)."""


class InspectorFailed(RuntimeError):
    """inspect's own TensorFlow process ended without an answer: placement failed, not the cluster
    (exit 3, an internal error)."""


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived: unwind like Ctrl-C (cleanups run, children are ended), then exit
    128 + the signal's number with one line."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    def __str__(self) -> str:
        return signal.Signals(self.signum).name


# The Ctrl-Cs (2), SIGTERMs and SIGHUPs that arrived while a command ran, in order: an error one caused
# ends the command as the signal does, even where the code it interrupted told it as another error
# (TensorFlow's lazy imports turn a KeyboardInterrupt into a RuntimeError that names it only in words).
ARRIVED: list[int] = []


def interrupt(signum: int, _frame: object) -> None:
    """Ctrl-C's handler while a command runs: Python's own (KeyboardInterrupt), the arrival kept."""
    ARRIVED.append(signum)
    raise KeyboardInterrupt


def swallowed(since: int) -> None:
    """End the command with the signal that arrived after ``since`` signals had, if the code it landed
    in swallowed it (TensorFlow's ``import ssl`` inside ``except ImportError``: the Ctrl-C lost and the
    demo went on to wait for Enter)."""
    if len(ARRIVED) > since:
        raise signal_exception(ARRIVED[since])


def signal_exception(signum: int) -> BaseException:
    """What a command raises for ``signum``: KeyboardInterrupt for Ctrl-C, Terminated for the others."""
    return KeyboardInterrupt() if signum == 2 else Terminated(signum)


class RuleError(UsageProblem, ValueError):
    """A rule of `placement check` that is malformed, or that its input cannot judge (exit 2; the
    Python API's ``check()`` raises it as a ValueError)."""
