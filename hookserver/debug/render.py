"""Render any debug reply for a terminal: rows as a table, objects as `key: value` lines.

The server decides the shape (a list of flat row objects, or an object that may nest), and this
module needs no knowledge of any command, so a new field or a new provider-backed command shows up
in hookctl without a change here. Text from the store (annotations, error messages) is untrusted:
control characters are escaped so a crafted value cannot rewrite the user's terminal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["render", "render_table"]

_INDENT = "  "
_NONE = "(none)"


def _clean(text: str) -> str:
    """One line, with control characters shown as escapes instead of being sent to the terminal."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def _scalar(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _float(value)
    return _clean(str(value))


def _float(value: float) -> str:
    """People read rates and sizes, not 17 digits: whole numbers as integers, others to 3 decimals.
    `-o json` keeps the exact value."""
    if value != value or value in (float("inf"), float("-inf")):
        return str(value)
    if value.is_integer():
        return str(int(value))
    return f"{value:.3f}".rstrip("0").rstrip(".")


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _cell(value: Any) -> str:
    """A table cell: scalars as is, small mappings as k=v pairs, lists comma-joined."""
    if isinstance(value, Mapping):
        return ",".join(f"{_clean(str(k))}={_cell(v)}" for k, v in value.items()) or "-"
    if isinstance(value, list):
        return ",".join(_cell(v) for v in value) or "-"
    return _scalar(value)


def _is_rows(items: Sequence[Any]) -> bool:
    """A list prints as a table when every item is an object of scalars."""
    return bool(items) and all(
        isinstance(item, Mapping) and all(_is_scalar(v) for v in item.values()) for item in items
    )


def render_table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Columns are the union of keys in first-seen order; headers upper-case, as kubectl does."""
    columns: list[str] = []
    for row in rows:
        for key in row:
            if key not in columns:
                columns.append(key)
    header = [_clean(c).upper() for c in columns]
    body = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(header[i]), *(len(r[i]) for r in body)) for i in range(len(columns))]
    lines = []
    for cells in [header, *body]:
        lines.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(cells)).rstrip())
    return lines


def _list_lines(items: Sequence[Any], pad: str) -> list[str]:
    if not items:
        return [pad + _NONE]
    if _is_rows(items):
        return [pad + line for line in render_table(items)]
    lines: list[str] = []
    for item in items:
        if isinstance(item, Mapping) and item:
            block = _object_lines(item, pad + _INDENT)
            block[0] = pad + "- " + block[0][len(pad) + len(_INDENT):]
            lines.extend(block)
        elif isinstance(item, list):
            lines.append(pad + "-")
            lines.extend(_list_lines(item, pad + _INDENT))
        else:
            lines.append(pad + "- " + _cell(item))
    return lines


def _object_lines(obj: Mapping[str, Any], pad: str) -> list[str]:
    if not obj:
        return [pad + _NONE]
    lines: list[str] = []
    for key, value in obj.items():
        name = _clean(str(key))
        if isinstance(value, Mapping):
            if value:
                lines.append(f"{pad}{name}:")
                lines.extend(_object_lines(value, pad + _INDENT))
            else:
                lines.append(f"{pad}{name}: -")
        elif isinstance(value, list):
            if value and all(_is_scalar(v) for v in value):
                lines.append(f"{pad}{name}: {', '.join(_scalar(v) for v in value)}")
            elif not value:
                lines.append(f"{pad}{name}: {_NONE}")
            else:
                lines.append(f"{pad}{name}:")
                lines.extend(_list_lines(value, pad + _INDENT))
        else:
            lines.append(f"{pad}{name}: {_scalar(value)}")
    return lines


def render(doc: Any) -> str:
    """The human form of a reply document (already decoded from JSON)."""
    if isinstance(doc, Mapping):
        lines = _object_lines(doc, "")
    elif isinstance(doc, list):
        lines = _list_lines(doc, "")
    else:
        lines = [_scalar(doc)]
    return "\n".join(lines)
