"""Every link in the project's Markdown resolves inside the project: a reader who clones the repository
has nothing else (no `../shared`, no sibling checkouts).

Checked: Markdown links and images `[text](target)`, reference definitions `[id]: target`, and paths
in code spans that name a Markdown file (`docs/x.md`) or climb out with `../`. URLs (scheme://, mailto:)
are not fetched. `file.md#anchor` must name a heading of that file (GitHub's slug rules).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SKIP_DIRS = {".venv", "build", "run", ".git", ".pytest_cache", ".mypy_cache", "node_modules"}

INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.MULTILINE)
CODE_SPAN = re.compile(r"`([^`\n]+)`")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def markdown_files() -> list[Path]:
    out = []
    for path in sorted(ROOT.rglob("*.md")):
        if not SKIP_DIRS.intersection(path.relative_to(ROOT).parts):
            out.append(path)
    return out


def _slug(heading: str) -> str:
    text = re.sub(r"[`*_~]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text())
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, re.MULTILINE)}


def _targets(text: str) -> list[tuple[str, str]]:
    """(kind, target) for every link-like reference outside fenced code blocks."""
    prose = FENCE.sub("", text)
    found = [("link", m.group(1)) for m in INLINE_LINK.finditer(prose)]
    found += [("reference", m.group(1)) for m in REFERENCE.finditer(prose)]
    for m in CODE_SPAN.finditer(prose):
        span = m.group(1).strip()
        if " " in span:
            continue
        if span.startswith("../") or "/../" in span or re.fullmatch(r"[\w./-]+\.md(#[\w-]+)?", span):
            found.append(("code span", span))
    return found


def problems(path: Path, root: Path = ROOT) -> list[str]:
    out = []
    for kind, target in _targets(path.read_text()):
        if URL.match(target) or target.startswith("#") and kind != "code span":
            if target.startswith("#") and _slug(target[1:]) not in _anchors(path):
                out.append(f"{kind} {target}: no such heading in {path.name}")
            continue
        file_part, _, anchor = target.partition("#")
        base = root if kind == "code span" and not file_part.startswith("../") else path.parent
        resolved = (base / file_part).resolve()
        if not resolved.is_relative_to(root):
            out.append(f"{kind} {target}: leaves the project ({resolved})")
        elif not resolved.exists():
            # a code span may be written relative to the file or to the project root
            if not (kind == "code span" and (path.parent / file_part).resolve().exists()):
                out.append(f"{kind} {target}: {resolved.relative_to(root)} does not exist")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            out.append(f"{kind} {target}: no heading #{anchor} in {resolved.relative_to(root)}")
    return out


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_links_resolve_inside_the_project(path: Path) -> None:
    assert not problems(path), problems(path)


def test_the_readme_and_docs_are_checked() -> None:
    names = {str(p.relative_to(ROOT)) for p in markdown_files()}
    assert {"README.md", "docs/architecture.md", "docs/operations.md"} <= names


def test_the_checker_catches_what_it_must(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "docs").mkdir(parents=True)
    (project / "docs" / "other.md").write_text("# Other\n\n## Some section\n")
    page = project / "docs" / "x.md"
    page.write_text(
        "# Title\n"
        "[arch](../../shared/ARCHITECTURE.md) and ![img](missing.png) and [ok](https://example.com)\n"
        "see `../../shared/STYLE.md` and `docs/nope.md`; [top](#title) [gone](#nowhere)\n"
        "[fine](other.md#some-section) [bad anchor](other.md#no-such) `docs/other.md`\n"
        "```\n[in a fence](../../ignored.md)\n```\n"
    )
    found = problems(page, root=project.resolve())
    assert any("../../shared/ARCHITECTURE.md: leaves the project" in p for p in found), found
    assert any("missing.png" in p and "does not exist" in p for p in found), found
    assert any("../../shared/STYLE.md: leaves the project" in p for p in found), found
    assert any("docs/nope.md" in p for p in found), found
    assert any("#nowhere" in p for p in found), found
    assert any("#no-such" in p for p in found), found
    assert len(found) == 6, found
