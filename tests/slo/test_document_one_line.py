"""A NodeSLO file with a syntax error is refused in one line (the agent logs it as one WARNING line)."""

from __future__ import annotations

import pytest

from hookserver.errors import ConfigError
from hookserver.slo.document import parse_slo_text


def test_a_yaml_syntax_error_is_one_line_with_its_position() -> None:
    with pytest.raises(ConfigError) as err:
        parse_slo_text("foo: [\n", origin="file /etc/slo.yaml")
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith("file /etc/slo.yaml: not valid YAML/JSON: while parsing a flow node")
    assert "line 2, column 1" in text
