"""What the workflow validator found: problems (the file is refused) and warnings (it is not),
each ``<where>: <what>`` in the one wording of ``uwf.cas.wording``."""

from __future__ import annotations

from dataclasses import dataclass, field

from uwf.cas.wording import key_text, kind, loc, seg

__all__ = ["Problems", "key_text", "kind", "loc", "seg"]


@dataclass
class Problems:
    """What a check found: problems (the file is refused) and warnings (it is not)."""

    lines: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def add(self, where: str, what: str) -> None:
        self.lines.append(f"{where}: {what}" if where else what)

    def warn(self, where: str, what: str) -> None:
        self.warnings.append(f"{where}: {what}" if where else what)
