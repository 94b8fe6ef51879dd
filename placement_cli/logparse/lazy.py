"""Patterns compiled the first time they are used: `parse` starts paying only for the patterns the
log in hand needs (most logs hold no wrapped line and no placement error)."""

from __future__ import annotations

import re
from typing import Any

_METHODS = ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split", "pattern", "flags",
            "groupindex")


class Pattern:
    """A ``re.compile(pattern, flags)`` made on first use; then its methods are the compiled
    pattern's own (kept on the instance, so a hot loop pays no extra lookup)."""

    def __init__(self, pattern: str | bytes, flags: int = 0) -> None:
        self._args = (pattern, flags)

    def __getattr__(self, name: str) -> Any:
        compiled = self.__dict__.get("_compiled")
        if compiled is None:  # the first use: compile once, keep the methods a loop calls on the instance
            compiled = self._compiled = re.compile(*self._args)  # type: ignore[type-var]  # str or bytes, as given
            for method in _METHODS:
                setattr(self, method, getattr(compiled, method))
        return getattr(compiled, name)
