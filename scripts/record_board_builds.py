#!/usr/bin/env python
"""What every embedded benchmark version the boards rank on builds to, recorded in
``drake_bench/leaderboard/builds.json`` (shipped beside the board definitions that pin the same hashes).

A board pins two hashes of its data (``drake_bench/leaderboard/definitions/*.json``):

* ``data_hash``, over the Parquet files' bytes. Those bytes carry the pyarrow version that wrote them (Parquet's
  ``created_by``) and Pillow's encoder output, so the same data built with other versions of either has another
  data hash;
* ``content_hash``, over the data as read back (every column, images as decoded pixels): the same whichever
  versions wrote the files.

This script rebuilds, with today's code and libraries, every version a board cites: each canonical board's
benchmark version, and each drake-synth version an archived main-job board's result files ran on. It refuses to
write the record unless every rebuild gives the data hash its board and result files cite (so the libraries
used are ones that reproduce the files' bytes), then records both hashes and the pyarrow and Pillow versions.
``tests/test_synth_versions.py`` rebuilds the same versions and checks them against the record: the content hash
always, the data hash where pyarrow and Pillow are the recorded ones.

    python scripts/record_board_builds.py            # rebuild in a temporary folder and write the record
    python scripts/record_board_builds.py --check    # rebuild and compare, write nothing (exit 1 on a difference)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "drake_bench" / "leaderboard" / "builds.json"
LIBRARIES = ("pyarrow", "pillow")  # what writes the bytes the data hash is over


def cited() -> dict[str, set[str]]:
    """``benchmark@version`` -> the data hashes boards pin and archived main-job result files cite for it."""
    from drake_bench.leaderboard import canonical_boards

    out: dict[str, set[str]] = {}
    for board in canonical_boards().values():
        if board.data_hash:
            out.setdefault(f"{board.benchmark_name}@{board.benchmark_version}", set()).add(board.data_hash)
    for path in (ROOT / "leaderboard").glob("**/main-job*/drake-synth/*/*/*/result.json"):  # current and archived
        bench = json.loads(path.read_text())["benchmark"]
        out.setdefault(f"{bench['name']}@{bench['version']}", set()).add(bench["data_hash"])
    return out


def _order(ref: str) -> tuple[str, tuple[int, ...]]:
    name, version = ref.split("@")
    return name, tuple(map(int, version.split(".")))


def rebuild(refs: list[str], workdir: Path) -> dict[str, dict[str, str]]:
    """Build each ``benchmark@version`` under ``workdir``; ``ref`` -> its data and content hash.

    The versions of one benchmark are built one over the other, oldest first: a task defined as in the previous
    version keeps its shards (drake_bench.benchmarks.build.task_recipe), so each distinct task definition is generated once,
    and each version's hashes are still over all of its shards."""
    from drake_bench.benchmarks.synth.builder import build_synth

    out: dict[str, dict[str, str]] = {}
    for ref in sorted(refs, key=_order):
        name = ref.split("@")[0]
        root = build_synth(ref, out=workdir / name)
        info = json.loads((root / "build_info.json").read_text())
        out[ref] = {"data_hash": info["data_hash"], "content_hash": info["content_hash"]}
    return out


def libraries() -> dict[str, str]:
    return {lib: metadata.version(lib) for lib in LIBRARIES}


def read_record() -> dict:
    return json.loads(RECORD.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="rebuild and compare with the record; write nothing")
    args = parser.parse_args(argv)
    wanted = cited()
    with tempfile.TemporaryDirectory(prefix="board-builds-") as tmp:
        built = rebuild(sorted(wanted), Path(tmp))
    if args.check:
        record, libs = read_record(), libraries()
        same_libs = record["libraries"] == libs
        bad = {
            ref: got
            for ref, got in built.items()
            if got["content_hash"] != record["builds"].get(ref, {}).get("content_hash")
            or (same_libs and got["data_hash"] != record["builds"][ref]["data_hash"])
        }
        for ref, got in sorted(bad.items()):
            print(f"{ref}: built {got}, recorded {record['builds'].get(ref)}", file=sys.stderr)
        same_bytes = sum(
            got["data_hash"] == record["builds"].get(ref, {}).get("data_hash") for ref, got in built.items()
        )
        print(
            f"{len(built) - len(bad)} of {len(built)} builds as recorded; {same_bytes} of {len(built)} to the recorded "
            f"data hash ({'same' if same_libs else 'other'} pyarrow/Pillow: {libs}, recorded {record['libraries']})"
        )
        return 1 if bad else 0
    wrong = {
        ref: (got["data_hash"], sorted(wanted[ref])) for ref, got in built.items() if {got["data_hash"]} != wanted[ref]
    }
    if wrong:
        print(
            "not written: these rebuilds do not give the data hash their boards cite (built, cited); with other "
            f"pyarrow/Pillow versions than the boards were built with ({libraries()}) that is expected:",
            file=sys.stderr,
        )
        for ref, (got, want) in sorted(wrong.items()):
            print(f"  {ref}: {got}, cited {want}", file=sys.stderr)
        return 1
    record = {
        "about": "What each benchmark version the boards rank on builds to (scripts/record_board_builds.py). "
        "data_hash: over the Parquet files' bytes, reproduced only with the libraries below; content_hash: "
        "over the data as read back, reproduced with any.",
        "libraries": libraries(),
        "builds": {ref: built[ref] for ref in sorted(built, key=_order)},
    }
    RECORD.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {RECORD.relative_to(ROOT)}: {len(built)} builds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
