"""Domain errors the CLI turns into exit code 2 (usage or input problems)."""


class InputError(Exception):
    """Input that is not a readable text log."""


class UsageProblem(Exception):
    """A run option that cannot work on this machine."""


class Terminated(BaseException):  # noqa: N818 - like KeyboardInterrupt: not an Exception, so nothing swallows it
    """SIGTERM or SIGHUP arrived: unwind like Ctrl-C (cleanups run, children are ended), then exit
    128 + the signal's number with one line."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    def __str__(self) -> str:
        import signal  # noqa: PLC0415

        return signal.Signals(self.signum).name
