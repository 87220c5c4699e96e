"""A failed check, named by the host and GPU at fault."""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Finding:
    check: str
    message: str
    host: str | None = None
    worker: str | None = None
    gpu: str | None = None

    def line(self) -> str:
        where = " ".join(f"{key}={value}" for key, value in (("host", self.host), ("worker", self.worker),
                                                              ("gpu", self.gpu)) if value)
        return f"FAIL [{self.check}] {where + ': ' if where else ''}{self.message}"

    def to_dict(self) -> dict[str, str | None]:
        return asdict(self)
