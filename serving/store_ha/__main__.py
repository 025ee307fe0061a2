"""`python -m serving.store_ha up | down [--purge] | status` (also `python -m serving store-ha …`)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from serving.store_ha.cluster import Cluster, ClusterLayout, StoreHaError

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="store-ha", description="The one-machine HA control store.")
    parser.add_argument("action", choices=("up", "down", "status"))
    parser.add_argument("--dir", type=Path, default=ROOT / "var" / "store-ha", help="work folder")
    parser.add_argument("--nodes", type=int, default=3, help="PostgreSQL nodes (2 or 3)")
    parser.add_argument("--purge", action="store_true", help="down: also delete the work folder")
    args = parser.parse_args(argv)
    cluster = Cluster(ClusterLayout(args.dir.resolve(), nodes=args.nodes))
    try:
        if args.action == "up":
            print(cluster.up())
            return 0
        if args.action == "down":
            cluster.down(purge=args.purge)
            return 0
        members = cluster.members()
        print(json.dumps([asdict(m) for m in members], indent=2))
        return 0 if cluster.healthy() else 1
    except StoreHaError as e:
        print(f"store-ha: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
