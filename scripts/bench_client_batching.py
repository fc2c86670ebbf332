#!/usr/bin/env python
"""Client batching against sequential training, side by side in one run.

``--client-batching`` trains a round's clients of one architecture in one pass per local step (a grouped LoRA, each
row of the batch through its own client's adapter; ``drake_bench/models/grouped.py``). For each model and group size
C: C clients, each with its own adapter and its own ``--steps`` batches of the main job's size (fresh drake-synth items,
fedllm-synth for text models, seed 777), trained once one after another (``LoraClients.train``, what every run does by
default) and once together (``LoraClients.train_group``), alternating over ``--repeats`` repeats, from the same start
each time. Reports the median seconds per round of the group, the ratio sequential / grouped, and how far apart the
adapters the two leave are: the largest entry difference (AdamW moves every coordinate by about the learning rate on
its first step whatever its gradient's size, so a coordinate whose gradient is float noise can differ by up to twice
the rate) and the norm of the difference relative to the norm of the update (the meaningful agreement).

On ``--device cuda`` the same comparison runs on the GPU (where a tiny model leaves most of the device idle and
stacking clients should pay); without a GPU those rows say so.

    python scripts/bench_client_batching.py
    python scripts/bench_client_batching.py --models tiny-llava-llama-m --clients 2,4 --out /tmp/cb

Writes ``<out>/client_batching.json`` and ``client_batching.md`` (default docs/performance/).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_packing import batches_for  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="tiny-llava-llama-m,tiny-llama-m")
    ap.add_argument("--clients", default="2,5,10", help="group sizes")
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--steps", type=int, default=3, help="local steps per client")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "performance")
    args = ap.parse_args(argv)

    import torch

    from drake_bench.methods.lora_clients import LoraClients, LoraSettings
    from drake_bench.models.zoo import model_info
    from drake_bench.plugins.protocol import ClientContext, FederationContext

    torch.set_num_threads(1)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no GPU here")
    sizes = [int(x) for x in args.clients.split(",") if x]
    rows = []
    for name in [n for n in args.models.split(",") if n]:
        for size in sizes:
            clients = list(range(1, size + 1))
            fed = FederationContext(
                benchmark="bench",
                modality="multimodal",
                clients=clients,
                allocation={c: name for c in clients},
                architectures={c: "a" for c in clients},
                rounds=1,
                local_steps=args.steps,
                batch_size=args.batch_size,
                seed=0,
                device=args.device,
                public_data=None,
                workdir=None,
            )  # type: ignore[arg-type]
            lc = LoraClients(LoraSettings())
            lc.setup(fed)
            gen = torch.Generator().manual_seed(0)
            start = {}
            for c in clients:  # distinct adapters (B = 0 at initialisation would make every client the same)
                st = lc.pool.get_state(c)
                start[c] = {k: v + 0.02 * torch.randn(v.shape, generator=gen) for k, v in st.items()}
            pool_batches = batches_for(bool(model_info(name).multimodal), args.batch_size, args.steps * size)
            batches = {c: pool_batches[(c - 1) * args.steps : c * args.steps] for c in clients}
            ctxs = [
                ClientContext(client_id=c, model_name=name, architecture="a", round_idx=0, seed=0, device=args.device)
                for c in clients
            ]

            def once(grouped: bool) -> tuple[float, dict]:
                for c in clients:
                    lc.pool.set_state(c, start[c])
                if args.device.startswith("cuda"):
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                if grouped:
                    lc.train_group(ctxs, [batches[c] for c in clients])
                else:
                    for ctx in ctxs:
                        lc.train(ctx, batches[ctx.client_id])
                if args.device.startswith("cuda"):
                    torch.cuda.synchronize()
                return time.perf_counter() - t0, {c: lc.pool.get_state(c) for c in clients}

            once(True)  # warm-up: adds the group's peft slots
            times: dict[bool, list[float]] = {False: [], True: []}
            states = {}
            for _ in range(args.repeats):
                for grouped in (False, True):
                    dt, states[grouped] = once(grouped)
                    times[grouped].append(dt)
            diff = max(
                float((states[True][c][k] - states[False][c][k]).abs().max()) for c in clients for k in states[False][c]
            )
            moved = sum(float((states[False][c][k] - start[c][k]).pow(2).sum()) for c in clients for k in start[c])
            apart = sum(
                float((states[True][c][k] - states[False][c][k]).pow(2).sum()) for c in clients for k in start[c]
            )
            med = {k: statistics.median(v) for k, v in times.items()}
            row = {
                "model": name,
                "clients": size,
                "device": args.device,
                "seconds_sequential": med[False],
                "seconds_grouped": med[True],
                "ratio_sequential_over_grouped": med[False] / med[True],
                "max_abs_weight_difference": diff,
                "update_difference_relative": (apart / moved) ** 0.5,
                "samples": {"sequential": times[False], "grouped": times[True]},
            }
            rows.append(row)
            print(
                {k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items() if k != "samples"}, flush=True
            )
    data = {
        "batch_size": args.batch_size,
        "steps": args.steps,
        "repeats": args.repeats,
        "device": args.device,
        "rows": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    suffix = "" if args.device == "cpu" else "_" + args.device.replace(":", "")
    (args.out / f"client_batching{suffix}.json").write_text(json.dumps(data, indent=1) + "\n")
    lines = [
        "# Client batching vs sequential training",
        "",
        f"Generated by `python scripts/bench_client_batching.py{'' if args.device == 'cpu' else ' --device ' + args.device}` "
        f"(see its docstring): C clients of one model, {args.steps} local steps of {args.batch_size} items each, "
        f"LoRA rank 8, AdamW, one torch thread, median of {args.repeats} alternating repeats, device "
        f"{args.device}.",
        "",
        "| model | clients | sequential s | grouped s | sequential / grouped | max weight diff | update diff / update |",
        "|:---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['clients']} | {r['seconds_sequential']:.2f} | {r['seconds_grouped']:.2f} "
            f"| **{r['ratio_sequential_over_grouped']:.2f}x** | {r['max_abs_weight_difference']:.1e} "
            f"| {r['update_difference_relative']:.1e} |"
        )
    (args.out / f"client_batching{suffix}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
