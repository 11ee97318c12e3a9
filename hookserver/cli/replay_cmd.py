"""`hookctl record export FILE` and `hookctl replay FILE ...`: the flight recorder's offline commands.

Neither talks to the agent. `record export` copies the recording out of the state dir (run it on the node,
or in the agent's container); `replay` runs on any machine with hookserver installed (the HTML report needs
the `report` extra: `pip install 'hookserver[report]'`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from hookserver.errors import ConfigError, InputError

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


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(f"expected KEY=VALUE, got {item!r}", field=flag)
        out[key.strip()] = value.strip()
    return out


def _load_document(path: str, flag: str) -> Any:
    import yaml

    try:
        with open(path, encoding="utf-8") as fh:
            return yaml.safe_load(fh)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}", field=flag) from exc
    except yaml.YAMLError as exc:
        raise InputError(f"{path} is not YAML or JSON: {exc}", field=flag) from exc


def _colocation(path: str, labels: dict[str, str]) -> Any:
    """A colocation-config ConfigMap, its `data`, the `colocation-config` JSON, or a bare strategy."""
    from hookserver.slo.colocation import COLOCATION_KEY, ColocationStrategy, parse_colocation_config

    doc = _load_document(path, "--colocation")
    if isinstance(doc, dict) and isinstance(doc.get("data"), dict):
        doc = doc["data"]
    if isinstance(doc, dict) and isinstance(doc.get(COLOCATION_KEY), str):
        doc = json.loads(doc[COLOCATION_KEY])
    if not isinstance(doc, dict):
        raise InputError(f"{path}: expected a colocation-config object", field="--colocation")
    problems: list[str] = []
    parsed = parse_colocation_config(doc, origin=path, problems=problems)
    if parsed is None or problems:
        raise InputError(f"{path}: " + "; ".join(problems or ["invalid colocation-config"]), field="--colocation")
    resolved = parsed.resolve(labels)
    strategy: ColocationStrategy = resolved.strategy
    return strategy


def _replay(args: argparse.Namespace, output: str) -> int:
    from pydantic import ValidationError

    from hookserver.predictor.settings import PredictorSettings
    from hookserver.recorder.reader import Recording
    from hookserver.recorder.replay import ReplayConfig, replay_many
    from hookserver.recorder.summary import compare, render_text
    from hookserver.slo.document import read_slo_file

    if not os.path.exists(args.file):
        raise InputError(f"no such file {args.file}", field="FILE")
    predictor = _pairs(args.predictor, "--predictor")
    try:
        PredictorSettings.model_validate(predictor)
    except ValidationError as exc:
        raise InputError(str(exc).replace("\n", " "), field="--predictor") from None
    gates = {k: v.lower() in ("1", "true", "yes", "on") for k, v in _pairs(args.gate, "--gate").items()}
    try:
        recording = Recording(args.file)
    except ValueError as exc:
        raise InputError(str(exc), field="FILE") from None
    node_labels: dict[str, str] = {}
    slo = None
    if args.slo:
        try:
            slo = read_slo_file(args.slo).resolve(node_labels).spec
        except ConfigError as exc:
            raise InputError(str(exc), field="--slo") from None
    colocation = _colocation(args.colocation, node_labels) if args.colocation else None
    node = recording.node_name
    recording.close()
    recorded, proposed = replay_many(args.file, [
        ReplayConfig("recorded"),
        ReplayConfig("proposed", slo=slo, colocation=colocation, predictor=predictor, gates=gates, as_recorded=False),
    ])
    cmp = compare(node, recorded, proposed)
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
        print(f"hookctl: error: {exc}", file=sys.stderr)
        return 2
    except ImportError as exc:
        print(f"hookctl: error: {exc}; the HTML report needs: pip install 'hookserver[report]'", file=sys.stderr)
        return 1
    except (OSError, ValueError) as exc:
        print(f"hookctl: error: {exc}", file=sys.stderr)
        return 1
