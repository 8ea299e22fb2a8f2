"""Aligned text columns for a person at a terminal: what ``--format table`` prints (through
``cli/options.emit_listing``, the one renderer of every listing), and how long ago a moment
was. Plain strings, no Typer; the JSON output stays the contract (docs/format.md, "Command
output").
"""

__all__ = ["CELL_WIDTH", "age", "table"]

CELL_WIDTH = 60  # characters of one table cell; longer text ends in "…"


def age(ms: int | None, now: int) -> str:
    """How long ago ``ms`` (unix ms) was, for a person: ``12s``, ``5m``, ``3h``, ``4d``."""
    if ms is None:
        return "-"
    seconds = max(0, now - ms) // 1000
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _cell(value: object, width: int) -> str:
    from uwf.util.fences import one_line

    text = one_line("" if value is None else str(value)).strip()
    return text if len(text) <= width else text[: width - 1] + "…"


def table(rows: list[list[object]], header: list[str] | None = None) -> str:
    """Rows as aligned columns (two spaces apart), with ``header`` first; every cell one line
    of at most ``CELL_WIDTH`` characters, the last column's up to three times that (control
    characters shown as spaces)."""
    cells = [
        [_cell(v, CELL_WIDTH if i < len(row) - 1 else 3 * CELL_WIDTH) for i, v in enumerate(row)]
        for row in ([header] if header else []) + rows
    ]
    if not cells:
        return ""
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    return "\n".join(lines) + "\n"
