"""The flight recorder and the what-if replay (issue 23).

The agent side is `FlightRecorder` (writer.py): a bounded SQLite record of what the planners and the predictor
read and what the agent decided. The operator side runs anywhere, without an agent: `Recording` (reader.py),
`replay` (replay.py) through the real planners, predictor and capacity formula, `summary` (text) and
`report_html` (charts; needs the optional `report` extra).
"""

from hookserver.recorder.export import export_recording
from hookserver.recorder.settings import RecorderSettings
from hookserver.recorder.writer import FlightRecorder

__all__ = ["FlightRecorder", "RecorderSettings", "export_recording"]
