"""Why a run stopped, as TensorFlow said it (logparse.causes.cause reads it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from placement_cli.model.fields import optional_text, text


def first_line(message: str) -> str:
    """A message's first line, its surrounding blank lines left out."""
    lines = message.strip().splitlines()
    return lines[0] if lines else ""


@dataclass(frozen=True)
class Cause:
    """What TensorFlow said stopped a run, in its own words: the line of its error that says why (not
    "Graph execution error:" or "Detected at node ..."), or a GPU library's line from its log."""

    line: str
    # gpu_memory: GPU memory could not be had (OOM, CUDA_ERROR_OUT_OF_MEMORY); gpu_library: a GPU library
    # handle or context could not be made (cuBLAS, cuDNN, cuFFT, cuSOLVER, a CUDA context): both what
    # another process holding the GPU causes; gpu: another GPU error; other: none of these
    kind: str = "other"
    log_line: str | None = None  # the log's GPU line, where the error's own line names no GPU trouble

    @property
    def said(self) -> str:
        """The cause in one line: the error's, and the log's GPU line after it."""
        return self.line if not self.log_line else f"{self.line} ({self.log_line})"

    @property
    def gpu_taken(self) -> bool:
        """Whether the GPU's memory or a handle on it could not be had (another process may hold it)."""
        return self.kind in ("gpu_memory", "gpu_library")

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.line, "kind": self.kind, "log_line": self.log_line}

    @classmethod
    def from_dict(cls, c: Any) -> Cause:
        return cls(line=text(c["line"]), kind=text(c.get("kind", "other")), log_line=optional_text(c.get("log_line")))
