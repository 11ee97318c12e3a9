"""Predictor settings: koordlet's defaults, and bad values stop startup naming the field."""

from __future__ import annotations

import pytest

from hookserver.config import load_settings
from hookserver.errors import ConfigError
from hookserver.predictor.settings import PredictorSettings


def test_defaults_are_koordlets():
    s = PredictorSettings()
    assert (s.training_interval_s, s.cold_start_duration_s, s.safety_margin_percent) == (60, 86400, 10)
    assert (s.cpu_half_life_s, s.memory_half_life_s, s.model_expiration_s) == (43200, 86400, 1800)
    assert (s.checkpoint_interval_s, s.checkpoint_max_per_step, s.checkpoint_round_s) == (600, 12, 60)


@pytest.mark.parametrize("key, value, field", [
    ("checkpoint_subdir", "../etc", "predictor.checkpoint_subdir"),
    ("status_file", "a/b.json", "predictor.status_file"),
    ("training_interval_s", 0, "predictor.training_interval_s"),
    ("safety_margin_percent", -5, "predictor.safety_margin_percent"),
    ("checkpoint_max_per_step", 0, "predictor.checkpoint_max_per_step"),
    ("bogus", 1, "predictor.bogus"),
])
def test_bad_values_name_the_field(key, value, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        load_settings(overrides={"predictor": {key: value}}, environ={})


def test_environment_reaches_the_predictor():
    settings = load_settings(environ={"HOOKSERVER_PREDICTOR__SAFETY_MARGIN_PERCENT": "20"})
    assert settings.predictor.safety_margin_percent == 20
