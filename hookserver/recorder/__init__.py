"""The flight recorder and the what-if replay (issue 23).

The agent side is `writer.FlightRecorder` (wired by `wiring.build_recorder`): a bounded SQLite record of what the
planners and the predictor read and what the agent decided. The operator side runs anywhere, without an agent:
`reader.Recording`, `replay.replay` through the real planners, predictor and capacity formula, `summary` (the
side-by-side figures and text) and `report_html` (charts; needs the optional `report` extra).

Only the settings are exported here: `hookserver.config` imports them, and the rest imports the QoS planners,
which import the config (a cycle if this module pulled them in).
"""

from hookserver.recorder.settings import RecorderSettings

__all__ = ["RecorderSettings"]
