"""A small JSON client for the real-apiserver tests: any verb on any path, as any token, with the status
code returned instead of raised, so a test can assert on 403 and 410 as easily as on 200.

The kubernetes python client is used where the code under test uses it (the informer); the tests' own
setup and RBAC checks go through this, because the python client (v30+) no longer has the 1.20-era
group versions (policy/v1beta1 eviction) and raises on every non-2xx status.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

import yaml

__all__ = ["KubeHttp", "Reply"]


@dataclass(frozen=True)
class Reply:
    status: int
    body: Any

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def reason(self) -> str:
        if isinstance(self.body, dict):
            return str(self.body.get("reason") or self.body.get("message") or "")
        return str(self.body)[:200]


class KubeHttp:
    def __init__(self, server: str, ca_pem: bytes, token: str, *, impersonate: str = "",
                 impersonate_groups: tuple[str, ...] = ()) -> None:
        self.server = server.rstrip("/")
        self.ca_pem = ca_pem
        self.token = token
        self.impersonate = impersonate
        self.impersonate_groups = impersonate_groups
        self._ssl = ssl.create_default_context(cadata=ca_pem.decode())

    @classmethod
    def from_kubeconfig(cls, path: str) -> KubeHttp:
        doc = yaml.safe_load(open(path).read())  # noqa: SIM115 - read once
        context_name = doc.get("current-context")
        context = next(c["context"] for c in doc["contexts"] if c["name"] == context_name)
        cluster = next(c["cluster"] for c in doc["clusters"] if c["name"] == context["cluster"])
        user = next(u["user"] for u in doc["users"] if u["name"] == context["user"])
        if "certificate-authority-data" in cluster:
            ca = base64.b64decode(cluster["certificate-authority-data"])
        else:
            ca = open(cluster["certificate-authority"], "rb").read()  # noqa: SIM115
        if "token" not in user:
            raise ValueError(f"{path}: the e2e tier needs a bearer-token user (got {sorted(user)})")
        return cls(cluster["server"], ca, user["token"])

    def as_token(self, token: str) -> KubeHttp:
        return KubeHttp(self.server, self.ca_pem, token)

    def as_user(self, user: str, groups: tuple[str, ...] = ()) -> KubeHttp:
        """Impersonation with this client's (admin) token."""
        return KubeHttp(self.server, self.ca_pem, self.token, impersonate=user, impersonate_groups=groups)

    def kubeconfig(self, directory: str, name: str = "kubeconfig") -> str:
        """A kubeconfig file for this server and token (what the agent under test reads)."""
        doc = {
            "apiVersion": "v1", "kind": "Config", "current-context": "e2e",
            "clusters": [{"name": "e2e", "cluster": {
                "server": self.server, "certificate-authority-data": base64.b64encode(self.ca_pem).decode()}}],
            "users": [{"name": "e2e", "user": {"token": self.token}}],
            "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "e2e"}}],
        }
        path = f"{directory}/{name}"
        with open(path, "w") as fh:
            yaml.safe_dump(doc, fh)
        return path

    def with_server(self, server: str) -> KubeHttp:
        return KubeHttp(server, self.ca_pem, self.token)

    # -- requests --------------------------------------------------------------------------------
    def request(self, method: str, path: str, body: Any = None, *, query: dict[str, str] | None = None,
                content_type: str = "application/json", timeout: float = 30.0) -> Reply:
        url = self.server + path + (("?" + urllib.parse.urlencode(query)) if query else "")
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        if self.impersonate:
            req.add_header("Impersonate-User", self.impersonate)
            for group in self.impersonate_groups:
                req.add_header("Impersonate-Group", group)
        try:
            with urllib.request.urlopen(req, context=self._ssl, timeout=timeout) as resp:
                return Reply(resp.status, _decode(resp.read()))
        except urllib.error.HTTPError as exc:
            return Reply(exc.code, _decode(exc.read()))

    def get(self, path: str, **query: str) -> Reply:
        return self.request("GET", path, query=query or None)

    def post(self, path: str, body: Any, **query: str) -> Reply:
        return self.request("POST", path, body, query=query or None)

    def put(self, path: str, body: Any) -> Reply:
        return self.request("PUT", path, body)

    def merge_patch(self, path: str, body: Any) -> Reply:
        return self.request("PATCH", path, body, content_type="application/merge-patch+json")

    def delete(self, path: str, grace_seconds: int | None = None) -> Reply:
        body = None if grace_seconds is None else {"gracePeriodSeconds": grace_seconds}
        return self.request("DELETE", path, body)

    def must(self, reply: Reply, what: str) -> Any:
        if not reply.ok:
            raise AssertionError(f"{what}: HTTP {reply.status}: {reply.reason()}")
        return reply.body


def _decode(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


