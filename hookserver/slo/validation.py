"""One readable error per invalid SLO document: every problem with its dotted wire path and value.

pydantic reports locations by alias when it validated by alias, so the paths read like the JSON the
user wrote (`resource-qos-config.clusterStrategy.beClass.memoryQOS.wmarkRatio`).
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from hookserver.errors import ConfigError

__all__ = ["problems_of", "raise_problems", "validate_part"]

M = TypeVar("M", bound=BaseModel)


def _path(prefix: str, loc: tuple[int | str, ...]) -> str:
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def problems_of(exc: ValidationError, prefix: str) -> list[str]:
    problems: list[str] = []
    for err in exc.errors(include_url=False):
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        shown = err.get("input")
        value = "" if isinstance(shown, (dict, list)) else f" (got {shown!r})"
        message = err["msg"].removeprefix("Value error, ")
        problems.append(f"{_path(prefix, loc)}: {message}{value}")
    return problems


def validate_part(model: type[M], data: Any, *, prefix: str, problems: list[str]) -> M | None:
    """Validate or append the problems (with `prefix` paths) and return None."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems.extend(problems_of(exc, prefix))
        return None


def raise_problems(origin: str, problems: list[str]) -> None:
    if problems:
        raise ConfigError(f"{origin}: invalid SLO configuration: " + "; ".join(problems))
