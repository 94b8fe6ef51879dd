"""Domain errors the CLI turns into exit code 2 (usage or input problems)."""


class InputError(Exception):
    """Input that is not a readable text log."""


class UsageProblem(Exception):
    """A run option that cannot work on this machine."""
