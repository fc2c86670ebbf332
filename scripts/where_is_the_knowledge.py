#!/usr/bin/env python
"""Where does a finished run hold its task knowledge? (not a test; an analysis of one run's checkpoints)

Evaluates, on Self and Others with the full test subsets (``--items`` per task), three sets of
adapters from the last round's checkpoint of a finished run, all scored by the standard evaluator:

  * ``local``  : each client's state after its last local training (what the evaluator scores, spec A9);
  * ``server`` : what the server sent each client after the last aggregation, used as that client's
                 state (for FedIT: its architecture's average adapter; methods whose messages are not
                 loadable states are skipped);
  * ``fresh``  : each client's freshly initialised state (the pretrained base model: no federated
                 training at all), the reference that tells learning from interference.

Use it to ask whether an aggregated model knows more about other clients' tasks than the local
models the evaluator scores. The run configuration is read from the result file; the checkpoints
from its ``out`` folder (``--checkpoints`` overrides).

    python scripts/where_is_the_knowledge.py runs/drake-synth/dynamic/fedit/1.0/result.json --seed 0
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from drake_bench.results.result_file import load_result_data


def _self_others(records) -> tuple[float, float]:
    from drake_bench.evaluation.metrics import _client_others, _client_self

    return 100 * float(np.mean(list(_client_self(records).values()))), 100 * float(
        np.mean(list(_client_others(records).values()))
    )


def main(argv: list[str] | None = None) -> None:
    from drake_bench.evaluator import checkpoint
    from drake_bench.evaluator.standard import Evaluator, RunConfig
    from drake_bench.plugins.protocol import State
    from drake_bench.plugins.registry import create_method
    from drake_bench.streams.stream import load_federated_data

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("result", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--items", type=int, default=20, help="test items per task for Self and Others")
    ap.add_argument("--checkpoints", type=Path, default=None, help="the run's --out folder (default: the result's)")
    ap.add_argument("--json", type=Path, default=None, help="also write the raw score records here")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)

    res = load_result_data(args.result)
    run_cfg = dict(res["fl"]["extra"]["run_config"])
    if args.checkpoints is not None:
        run_cfg["out"] = str(args.checkpoints)
    cfg = RunConfig(**{**run_cfg, "seeds": [args.seed], "others_subsample": args.items, "self_subsample": args.items})
    ev = Evaluator(cfg)
    run_dir = ev.run_dir(args.seed)
    prog = checkpoint.load(run_dir)
    if prog is None:
        raise SystemExit(f"no checkpoint in {run_dir}: pass the run's --out folder with --checkpoints")
    fed = load_federated_data(
        ev.spec,
        ev.scenario,
        args.seed,
        data_dir=cfg.data_dir,
        revision=cfg.revision,
        rounds=cfg.rounds,
        local_steps=cfg.local_steps,
        batch_size=cfg.batch_size,
    )
    ev._arch = ev._architectures()
    method = create_method(cfg.method, cfg.method_config)
    method.setup(ev.federation_context(fed, args.seed, ev.method_local_steps(method)))
    last = prog.completed_rounds - 1
    variants = {"local": dict(prog.clients)}
    sent = {c: m for c, m in prog.messages.items() if m is not None and m.tensors}
    if len(sent) == len(fed.clients) and all(set(sent[c].tensors) == set(prog.clients[c].tensors) for c in fed.clients):
        variants["server"] = {c: State(tensors=sent[c].tensors) for c in fed.clients}
    variants["fresh"] = {c: method.init_client(ev.ctx(c, 0, args.seed)) for c in fed.clients}

    print(f"{res['method']['name']} seed {args.seed}, after round {prog.completed_rounds}, {args.items} items per task")
    print("| adapters | Self | Others |\n|:---|---:|---:|")
    dump = {}
    for name, states in variants.items():
        records = ev.evaluate_round(method, fed, states, args.seed, last)
        s, o = _self_others(records)
        print(f"| {name} | {s:.2f} | {o:.2f} |", flush=True)
        dump[name] = [r.model_dump() for r in records]
    if "server" not in variants:
        print("(server messages are not loadable client states for this method: skipped)")
    if args.json:
        args.json.write_text(json.dumps(dump))


if __name__ == "__main__":
    main()
