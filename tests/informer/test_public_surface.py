"""`__all__` of the informer and slo packages lists exactly what they export, and nothing else imports kubernetes."""

from __future__ import annotations

import ast
from pathlib import Path

import hookserver.informer as informer
import hookserver.slo as slo

ROOT = Path(__file__).resolve().parents[2]


def test_every_exported_name_resolves() -> None:
    for package in (informer, slo):
        missing = [name for name in package.__all__ if getattr(package, name, None) is None]
        assert not missing, f"{package.__name__}: {missing}"
        assert sorted(package.__all__) == sorted(set(package.__all__))


def test_only_the_informer_imports_kubernetes() -> None:
    offenders = []
    for path in (ROOT / "hookserver").rglob("*.py"):
        # hookserver/kubectl is the kubectl plugin: an apiserver client beside the agent, never imported by it
        if "informer" in path.parts or "api" in path.parts or "kubectl" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == "kubernetes" or n.startswith("kubernetes.") for n in names):
                offenders.append(str(path.relative_to(ROOT)))
    assert not offenders


def test_config_import_does_not_load_the_kubernetes_client() -> None:
    import subprocess
    import sys

    code = "import sys, hookserver.config; print('kubernetes' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
