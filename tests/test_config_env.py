"""Environment variables that share the HOOKSERVER_ prefix but are not settings must not stop the agent:
Kubernetes injects service links for a Service named `hookserver` into every pod of its namespace
(HOOKSERVER_SERVICE_HOST, HOOKSERVER_PORT_9316_TCP, ...), and the test harness exports
HOOKSERVER_E2E_KUBECONFIG / HOOKSERVER_IMAGE_DIR in the shell that also starts agents. A real setting
with a typo is still refused."""

from __future__ import annotations

import pytest

from hookserver.config import load_settings
from hookserver.errors import ConfigError

SERVICE_LINKS = {
    "HOOKSERVER_SERVICE_HOST": "10.0.0.7",
    "HOOKSERVER_SERVICE_PORT": "9316",
    "HOOKSERVER_SERVICE_PORT_METRICS": "9316",
    "HOOKSERVER_PORT": "tcp://10.0.0.7:9316",
    "HOOKSERVER_PORT_9316_TCP": "tcp://10.0.0.7:9316",
    "HOOKSERVER_PORT_9316_TCP_PROTO": "tcp",
    "HOOKSERVER_PORT_9316_TCP_PORT": "9316",
    "HOOKSERVER_PORT_9316_TCP_ADDR": "10.0.0.7",
}


def test_kubernetes_service_links_are_not_settings() -> None:
    settings = load_settings(environ={**SERVICE_LINKS, "HOOKSERVER_NODE_NAME": "n1"})
    assert settings.node_name == "n1"


def test_the_test_harness_variables_are_not_settings() -> None:
    settings = load_settings(environ={"HOOKSERVER_E2E_KUBECONFIG": "/tmp/kubeconfig", "HOOKSERVER_IMAGE_DIR": "build",
                                      "HOOKSERVER_NODE_NAME": "n2"})
    assert settings.node_name == "n2" and settings.kubeconfig == ""


def test_a_misspelt_setting_is_still_refused() -> None:
    with pytest.raises(ConfigError, match="failure_polcy"):
        load_settings(environ={"HOOKSERVER_HOOK__FAILURE_POLCY": "Fail"})
    with pytest.raises(ConfigError, match="porte"):
        load_settings(environ={"HOOKSERVER_PORTE": "1"})
