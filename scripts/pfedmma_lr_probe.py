#!/usr/bin/env python
"""pFedMMA's SGD learning rate on the tiny zoo: how far one round of local training moves a client (not a test).

The paper's lr = 1e-3 (SGD, momentum 0.9, weight decay 5e-4, with MMA's gradient-scale layer at α = 0.005) was
tuned for CLIP ViT-B/16 on few-shot classification. This probe runs one client of drake-synth (or ``--benchmark``; the
benchmark's own stream, built small in a scratch folder) through one round of the benchmark's local steps at each learning rate,
from the same initial state, with the shipped pretrained zoo model, and reports for each:

* the answer-token loss on the client's own test items (its Self tasks): of the base model (adapters off), with
  the initial adapters, and after the round;
* the mean training loss of the first and last ten steps;
* how far the adapters moved: ||W_after - W_before|| / ||W_before|| over all adapter weights, and over the shared
  projections alone.

A rate is usable when the held-out loss falls within a round and training stays finite. The held-out items are the
client's *test* items, so this probe diagnoses a rate and cannot select one: the default ``sgd_lr`` is selected on
the validation split with ``drake-bench tune`` (docs/methods/pfedmma.md, "The learning rate", has both tables).

    python scripts/pfedmma_lr_probe.py --steps 100 --client 3            # lrs 3e-3 .. 5e-2
    python scripts/pfedmma_lr_probe.py --benchmark fedllm-synth --client 1 --lrs 0.01,0.02,0.05
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lrs", default="0.003,0.01,0.02,0.05")
    ap.add_argument("--benchmark", default="drake-synth")
    ap.add_argument("--client", type=int, default=3)
    ap.add_argument("--steps", type=int, default=None, help="local steps (default: the benchmark's)")
    ap.add_argument("--test-items", type=int, default=48)
    ap.add_argument("--scale", default="0.2", help="DRAKE_BENCH_SYNTH_SCALE of the scratch build")
    ap.add_argument("--out", default=None, help="write the rows as JSON here")
    args = ap.parse_args()

    home = tempfile.mkdtemp(prefix="pfedmma-lr-")
    os.environ["DRAKE_BENCH_HOME"] = home
    os.environ.setdefault("DRAKE_BENCH_SYNTH_SCALE", args.scale)
    import torch

    torch.set_num_threads(1)
    from drake_bench.evaluator.standard import Evaluator, RunConfig
    from drake_bench.methods.pfedmma.plugin import PFedMMA
    from drake_bench.models.engine import loss_on
    from drake_bench.plugins.protocol import ClientContext, FederationContext

    ev = Evaluator(
        RunConfig(
            benchmark=args.benchmark,
            method="zero-shot",
            scenario="static",
            rounds=1,
            isolation="inline",
            out=os.path.join(home, "runs"),
        )
    )
    run = ev.init_or_resume(0)
    try:
        c = args.client
        steps = args.steps or run.local_steps
        batches = run.fed.round_batches(c, 0, local_steps=steps)
        test = [
            s.for_method()
            for t in run.fed.seen_tasks(c, 0)
            for s in run.fed.test_samples(t, owner=c, limit=args.test_items // max(1, len(run.fed.seen_tasks(c, 0))))
        ]
        alloc = {c: run.federation.allocation[c]}
        arch = run.federation.architectures[c]
        modality = run.federation.modality
    finally:
        run.method.close()

    def held_out(method: PFedMMA, base: bool = False) -> float:
        with method.clients.pool.use(c) as model, torch.no_grad():
            model.eval()
            proc = method.clients.pool.processor(c)
            with model.disable_adapter() if base else contextlib.nullcontext():
                losses = [float(loss_on(model, proc, test[i : i + 8])) for i in range(0, len(test), 8)]
        return sum(losses) / len(losses)

    rows = []
    for lr in [float(x) for x in args.lrs.split(",")]:
        method = PFedMMA(PFedMMA.Config(sgd_lr=lr))
        method.setup(
            FederationContext(
                benchmark=args.benchmark,
                modality=modality,
                clients=[c],
                allocation=alloc,
                architectures={c: arch},
                rounds=1,
                local_steps=steps,
                batch_size=4,
                seed=0,
                device="cpu",
                public_data=lambda n: [],
                workdir=home,
            )
        )
        ctx = ClientContext(client_id=c, model_name=alloc[c], architecture=arch, round_idx=0, seed=0)
        start = method.init_client(ctx)
        base, before = held_out(method, base=True), held_out(method)
        losses: list[float] = []
        method.clients.train = _recording(method.clients.train, losses)  # type: ignore[method-assign]
        t0 = time.perf_counter()
        _, end = method.client_update(ctx, start, None, batches)
        seconds = time.perf_counter() - t0
        after = held_out(method)

        def moved(keys: list[str]) -> float:
            num = sum(float(torch.linalg.norm(end.tensors[k] - start.tensors[k]) ** 2) for k in keys)
            den = sum(float(torch.linalg.norm(start.tensors[k]) ** 2) for k in keys)
            return (num / den) ** 0.5

        weights = [k for k in start.tensors if k.endswith(".weight")]
        row = {
            "lr": lr,
            "model": alloc[c],
            "steps": steps,
            "test_items": len(test),
            "held_out_base": round(base, 4),
            "held_out_before": round(before, 4),
            "held_out_after": round(after, 4),
            "train_first10": round(sum(losses[:10]) / max(1, len(losses[:10])), 4),
            "train_last10": round(sum(losses[-10:]) / max(1, len(losses[-10:])), 4),
            "moved_all": round(moved(weights), 5),
            "moved_shared": round(moved([k for k in weights if k.startswith("shared.")]), 5),
            "seconds": round(seconds, 1),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


def _recording(train, losses: list[float]):
    """Wrap MMAClients.train so that every step's loss is recorded (LoraClients.train calls
    ``drake_bench.models.train_step`` once per step)."""
    import drake_bench.models as models

    def wrapped(ctx, batches, adapter=None, after_step=None):
        real = models.train_step

        def step(*a, **k):
            loss = real(*a, **k)
            losses.append(loss)
            return loss

        models.train_step = step
        try:
            return train(ctx, batches, adapter=adapter, after_step=after_step)
        finally:
            models.train_step = real

    return wrapped


if __name__ == "__main__":
    main()
