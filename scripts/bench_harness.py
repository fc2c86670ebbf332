#!/usr/bin/env python
"""What drake_bench's own machinery costs: its stream against raw pyarrow + PIL, its evaluator against a bare loop.

* **Stream vs raw**: every training item one drake-synth client receives over the default run (``load_client_stream``:
  verified shards through ``datasets``, the scenario's schedule, images decoded to PIL) against reading the same
  number of rows of the client's tasks' train shards with ``pyarrow.parquet`` and decoding every image with PIL
  (no verification, no schedule): items per second each, and raw / stream.
* **Harness vs bare loop**: SFT's local training of every drake-synth client for ``--rounds`` rounds of
  ``--steps`` steps, once through the evaluator (``drake_bench.run``: the method in its worker process, states
  checkpointed, batches keyed; its ``fl.extra.phase_seconds['training']``) and once as a bare loop (the same
  ``LoraClients.train`` calls on the same batches in this process, nothing else): seconds each, harness / bare.
  The evaluator's evaluation and fast adaptation are not part of the comparison (the bare loop has none).

Run it on an idle machine after the benchmark is built (any run builds it)::

    python scripts/bench_harness.py

Writes ``<out>/harness.json`` and ``harness.md`` (default docs/performance/).
"""

from __future__ import annotations

import argparse
import io
import json
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def stream_vs_raw(client: int) -> dict[str, float]:
    import pyarrow.parquet as pq
    from PIL import Image

    from drake_bench import load_benchmark, load_client_stream
    from drake_bench.benchmarks.store import built_root, shard_path

    t0 = time.perf_counter()
    stream = load_client_stream("drake-synth", client)
    items = 0
    for _, batches in stream.rounds():
        for batch in batches:
            for s in batch:
                for im in s.images:
                    im.convert("RGB").load()
                items += 1
    stream_s = time.perf_counter() - t0
    spec = load_benchmark("drake-synth")
    root = built_root("drake-synth")
    t0 = time.perf_counter()
    tables = [
        pq.read_table(shard_path(root, t, "train"), columns=["images", "question", "answer"])
        for t in spec.client(client).tasks
    ]
    done, row = 0, 0
    while done < items:
        for table in tables:
            if done >= items:
                break
            images = table.column("images")[row % table.num_rows].as_py()
            for im in images:
                Image.open(io.BytesIO(im["bytes"])).convert("RGB").load()
            done += 1
        row += 1
    raw_s = time.perf_counter() - t0
    return {
        "items": items,
        "stream_seconds": stream_s,
        "raw_seconds": raw_s,
        "stream_items_per_s": items / stream_s,
        "raw_items_per_s": items / raw_s,
        "raw_over_stream": stream_s / raw_s,
    }


def harness_vs_bare(rounds: int, steps: int) -> dict[str, float]:
    import torch

    from drake_bench import RunConfig, run
    from drake_bench.evaluator.standard import Evaluator
    from drake_bench.methods.lora_clients import LoraClients, LoraSettings
    from drake_bench.plugins.guard import GuardedMethod
    from drake_bench.plugins.protocol import ClientContext
    from drake_bench.plugins.registry import create_method

    config = dict(
        benchmark="drake-synth",
        method="sft",
        rounds=rounds,
        local_steps=steps,
        eval_every_rounds=rounds,
        others_subsample=0,
        self_subsample=1,
        fast_adaptation=False,
    )
    with tempfile.TemporaryDirectory() as tmp:
        res = run(RunConfig(out=tmp, resume=False, **config))
        harness = float(res.fl.extra["phase_seconds"]["0"]["training"])
        ev = Evaluator(RunConfig(out=tmp, **config))
        fed = ev.federated_data(0)
        ev.describe_models(GuardedMethod(create_method("sft", {})))  # architectures, as the run saw them
        federation = ev.federation_context(fed, 0, steps)
        arch = federation.architectures
        clients = LoraClients(LoraSettings())
        clients.setup(federation)
        batches = {(c, r): fed.round_batches(c, r, local_steps=steps) for r in range(rounds) for c in fed.clients}
        torch.manual_seed(0)
        t0 = time.perf_counter()
        for r in range(rounds):
            for c in fed.clients:
                ctx = ClientContext(
                    client_id=c, model_name=ev.allocation[c], architecture=arch[c], round_idx=r, seed=0, device="cpu"
                )
                clients.train(ctx, batches[(c, r)])
        bare = time.perf_counter() - t0
    return {
        "rounds": rounds,
        "steps": steps,
        "harness_training_seconds": harness,
        "bare_training_seconds": bare,
        "harness_over_bare": harness / bare,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--client", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=4, help="at least the clients' task count (dynamic scenario)")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "performance")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    data = {"stream": stream_vs_raw(args.client), "training": harness_vs_bare(args.rounds, args.steps)}
    print(json.dumps(data, indent=1), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "harness.json").write_text(json.dumps(data, indent=1) + "\n")
    s, t = data["stream"], data["training"]
    lines = [
        "# drake_bench's own costs",
        "",
        "Generated by `python scripts/bench_harness.py` (see its docstring), one torch thread.",
        "",
        f"Stream vs raw pyarrow + PIL (drake-synth client {args.client}, every training item of the default run, "
        f"{s['items']} items, images decoded):",
        "",
        "| reader | seconds | items/s |",
        "|:---|---:|---:|",
        f"| `load_client_stream` | {s['stream_seconds']:.2f} | {s['stream_items_per_s']:.0f} |",
        f"| pyarrow + PIL | {s['raw_seconds']:.2f} | {s['raw_items_per_s']:.0f} |",
        "",
        f"Stream / raw time: **{s['raw_over_stream']:.2f}x**.",
        "",
        f"Harness vs bare loop (SFT's local training of every client, {t['rounds']} rounds x {t['steps']} steps):",
        "",
        "| loop | training seconds |",
        "|:---|---:|",
        f"| evaluator (`drake_bench.run`, process isolation) | {t['harness_training_seconds']:.1f} |",
        f"| bare `LoraClients.train` loop | {t['bare_training_seconds']:.1f} |",
        "",
        f"Harness / bare: **{t['harness_over_bare']:.2f}x**.",
    ]
    (args.out / "harness.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
