"""`hookctl record export FILE` and `hookctl replay FILE ...`: the flight recorder's offline commands.

Neither talks to the agent. `record export` copies the recording out of the state dir (run it on the node,
or in the agent's container); `replay` runs on any machine with hookserver installed (the HTML report needs
the `report` extra: `pip install 'hookserver[report]'`).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
from typing import Any

from hookserver.errors import InputError

__all__ = ["add_parsers", "run"]

COMMANDS = ("record", "replay")


def add_parsers(sub: Any, output: argparse.ArgumentParser) -> None:
    record = sub.add_parser("record", parents=[output], help="the flight recorder: `record export FILE`")
    record_sub = record.add_subparsers(dest="record_command", required=True, metavar="export")
    export = record_sub.add_parser("export", help="a consistent copy of the node's recording, to take off the node")
    export.add_argument("file")
    export.add_argument("--state-dir", default=os.environ.get("HOOKSERVER_STATE_DIR", "/var/run/hookserver"),
                        help="the agent's state_dir (default $HOOKSERVER_STATE_DIR or /var/run/hookserver)")
    export.add_argument("--name", default="flight-recorder.sqlite", help="recorder.file (default %(default)s)")
    replay = sub.add_parser("replay", parents=[output],
                            help="replay a recording as recorded and under another NodeSLO/colocation-config")
    replay.add_argument("file")
    replay.add_argument("--slo", help="a NodeSLO or slo-controller-config document (YAML or JSON)")
    replay.add_argument("--colocation", help="a colocation-config (the ConfigMap, its data, or the strategy)")
    replay.add_argument("--predictor", nargs="*", default=[], metavar="KEY=VALUE",
                        help="predictor settings, e.g. safety_margin_percent=5 cold_start_duration_s=3600")
    replay.add_argument("--gate", nargs="*", default=[], metavar="NAME=BOOL", help="feature gates to change")
    replay.add_argument("--html", help="write the HTML report here (needs hookserver[report])")


def _replay(args: argparse.Namespace, output: str) -> int:
    from hookserver.recorder.proposal_files import read_proposal
    from hookserver.recorder.reader import open_recording
    from hookserver.recorder.replay import REPLAYED_GATES, ReplayConfig, replay_many
    from hookserver.recorder.summary import compare, render_text

    proposal = read_proposal(slo=args.slo, colocation=args.colocation, predictor=args.predictor, gate=args.gate,
                             gates=REPLAYED_GATES)
    recording = open_recording(args.file)
    try:
        proposal.check_against(recording)
        described = proposal.describe(recording)
        node = recording.node_name
    finally:
        recording.close()
    recorded, proposed = replay_many(args.file, [
        ReplayConfig("recorded"), ReplayConfig("proposed", proposal=proposal, as_recorded=False)])
    cmp = compare(node, recorded, proposed, proposal=described)
    if output == "json":
        sys.stdout.write(json.dumps(cmp.describe(), indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(render_text(cmp) + "\n")
    if args.html:
        from hookserver.recorder.report_html import write_report

        write_report(cmp, args.html, title=f"hookserver replay: {args.file}")
        print(f"report: {os.path.abspath(args.html)}", file=sys.stderr)
    return 0


def run(args: argparse.Namespace, output: str) -> int:
    """Run `record` or `replay`; exit 0, 1 (failed) or 2 (bad input), one line on stderr."""
    try:
        if args.command == "record":
            from hookserver.recorder.export import export_recording

            size = export_recording(os.path.join(args.state_dir, args.name), args.file)
            print(f"{args.file}: {size} bytes")
            return 0
        return _replay(args, output)
    except InputError as exc:
        print(f"hookctl: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except ImportError as exc:
        print(f"hookctl: error: {exc}; the HTML report needs: pip install 'hookserver[report]'", file=sys.stderr)
        return 1
    except (OSError, ValueError) as exc:
        print(f"hookctl: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except sqlite3.Error as exc:  # a recording that went bad while it was read (RecordingError covers opening)
        print(f"hookctl: error: {args.file}: SQLite: {_one_line(exc)}", file=sys.stderr)
        return 1


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
