#!/usr/bin/env python
"""Why does fine-tuning not turn what the embedded model knows into its answers? (not a test; a diagnosis)

Measurements on the choice tasks (yes/no and multiple choice) of drake-synth, each on fresh items drawn
from the task generators with seeds disjoint from the built benchmark (training 4242, evaluation 9001), so
nothing here reads a benchmark split:

``probe``: what the frozen model *knows*. A multinomial logistic regression (torch, L-BFGS, L2-regularised,
standardised features) is fitted on the frozen activations of ``--probe-items`` training items and scored on
``--eval-items`` held-out items, predicting the answer's option text. Three read-out points:

  * ``tower``: the vision tower's features the projector reads, mean-pooled over each picture's tokens and
    concatenated picture by picture (zero-padded to the task's most pictures);
  * ``projector``: the projector's output, pooled the same way (what the language model is given);
  * ``lm``: the language model's final hidden state (after its last norm) at the prompt's last token,
    ``ASSISTANT:``, which is where the answer's first token is read from.

``finetune``: what fine-tuning makes the model *say*. For each variant (``VARIANTS``) a fresh adapter is trained
with AdamW (``--steps`` steps of ``--batch`` items) and scored with the evaluator's own rule (options by
cloze log-likelihood, :func:`drake_bench.models.predict`) on the same held-out items, and on ``--eval-items``
of its own training items (can it fit what it saw?); at every step count of ``--steps`` along the way. A
variant changes one lever from ``reference`` (the reference entries' LoRA settings trained on the task alone):
the learning rate, gradient clipping, the mixture (the client's four tasks in turn, as every board trains), what is trainable
(``lm_head`` or the projector through peft's ``modules_to_save``), or the read-out (the option letter as the
target and the scored text).

Every job's record is appended to ``<out>/records.jsonl`` as it finishes; a rerun skips the jobs already
there, so an interrupted diagnosis resumes. ``--report-only`` rewrites the tables from the records.

    python scripts/diagnose_embedded_model.py probe                       # ~5 min, 2 cores
    python scripts/diagnose_embedded_model.py finetune --variants reference,"lr 3e-2" --steps 200,800
    python scripts/diagnose_embedded_model.py vocabulary --tasks all      # seconds
    python scripts/diagnose_embedded_model.py report

Writes ``records.jsonl``, ``diagnosis.md`` and ``diagnosis.json`` (the tables) under ``--out`` (default
docs/findings/embedded-model-diagnosis/).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

ROOT = Path(__file__).resolve().parents[1]
BENCH = "drake-synth"
TRAIN_SEED, EVAL_SEED = 4242, 9001
DEFAULT_OUT = ROOT / "docs" / "findings" / "embedded-model-diagnosis"
# The tasks of the probe table (flat under fine-tuning although a probe reads them), plus the three it
# names as hard for the features; ``--tasks all`` takes every choice task of the ten clients.
FOCUS_TASKS = (
    "rel-defect-2",
    "vqa-distortion-type",
    "vqa-quality-triple",
    "rsn-odd-one-out",
    "icon-clock",
    "dish-location",
    "rel-motion",
    "rel-color-consistency",
    "rel-style-consistency",
    "rsn-bongard-relation",
)


@dataclass(frozen=True)
class Variant:
    """One lever moved from the reference fine-tuning (None: the reference's value)."""

    learning_rate: float | None = None
    mixed: bool = False  # train on the client's four tasks in turn (as the boards do) instead of the task alone
    modules_to_save: tuple[str, ...] = ()  # peft modules_to_save: fully trained copies ("lm_head", the projector)
    lora: bool = True  # False: only modules_to_save train
    letter: bool = False  # the option letter is the training target and the scored text
    rank: int | None = None
    max_grad_norm: float | None = None  # clip the adapter's gradient norm (the reference does not clip)
    item_mean: bool = False  # loss: mean over items of each item's mean token loss (the engine: mean over all tokens)
    warmup_steps: int = 0  # linear warm-up of the rate over this many steps, then constant (the reference: none)


VARIANTS: dict[str, Variant] = {
    "reference": Variant(),
    "mixed 4 tasks": Variant(mixed=True),
    "lr 1e-3": Variant(learning_rate=1e-3),
    "lr 3e-4": Variant(learning_rate=3e-4),
    "clip 1.0": Variant(max_grad_norm=1.0),
    "lr 3e-2": Variant(learning_rate=3e-2),
    "mixed item-mean": Variant(mixed=True, item_mean=True),
    "mixed item-mean + clip": Variant(mixed=True, item_mean=True, max_grad_norm=1.0),
    "mixed + clip": Variant(mixed=True, max_grad_norm=1.0),
    "+ lm_head": Variant(modules_to_save=("lm_head",)),
    "lm_head only": Variant(modules_to_save=("lm_head",), lora=False),
    "+ projector": Variant(modules_to_save=("multi_modal_projector",)),
    # The two levers of the short budget together (run 8): the output layer trainable beside the adapter, each
    # item weighed alike, the gradient clipped; then also a higher rate, warmed up so its first steps do not collapse.
    "mixed item-mean + clip + lm_head": Variant(
        mixed=True, item_mean=True, max_grad_norm=1.0, modules_to_save=("lm_head",)
    ),
    "mixed item-mean + clip + lm_head + lr 1e-2 warm-up 20": Variant(
        mixed=True,
        item_mean=True,
        max_grad_norm=1.0,
        modules_to_save=("lm_head",),
        learning_rate=1e-2,
        warmup_steps=20,
    ),
    "letter target": Variant(letter=True),
    "rank 32": Variant(rank=32),
}


def _weights_identity(model_name: str) -> str | None:
    """The sha256 of the model's safetensors as the weights folder in use pins it (None: a cache-built model), so a
    record says which zoo it was measured on."""
    from drake_bench.models.shipped import is_shipped, shipped_identity

    return shipped_identity(model_name)["weights_sha256"] if is_shipped() else None


def _bench():
    from drake_bench.benchmarks.manifest import load_benchmark

    return load_benchmark(BENCH)


def _items(task_id: str, n: int, seed: int) -> list:
    from drake_bench.benchmarks.synth.loader import fresh_items

    return fresh_items(_bench().task(task_id), n, seed)


def _client_of(task_id: str) -> int:
    return next(c.id for c in _bench().clients if task_id in c.tasks)


def choice_tasks() -> list[str]:
    from drake_bench.benchmarks.sample import AnswerType

    spec = _bench()
    return [
        t
        for c in spec.clients
        for t in c.tasks
        if spec.task(t).answer_type in (AnswerType.YES_NO, AnswerType.MULTIPLE_CHOICE)
    ]


def _label(sample) -> str:
    from drake_bench.models.prompting import LETTERS, answer_letter, options

    return options(sample)[LETTERS.index(answer_letter(sample))].strip()


# --------------------------------------------------------------------------- probe


def features(model, proc, items: list, max_images: int) -> dict[str, "torch.Tensor"]:
    """Frozen activations of ``items`` at the three read-out points (one row per item)."""
    import torch

    from drake_bench.models.engine import _encode_prompt

    got: dict[str, torch.Tensor] = {}
    mm = model.model.multi_modal_projector
    hooks = [
        mm.register_forward_pre_hook(lambda _m, a: got.__setitem__("tower", a[0].detach())),
        mm.register_forward_hook(lambda _m, _a, out: got.__setitem__("projector", out.detach())),
    ]
    rows: dict[str, list[torch.Tensor]] = {"tower": [], "projector": [], "lm": []}
    try:
        with torch.no_grad():
            for s in items:
                ids, pixels = _encode_prompt(proc, s.as_query())
                out = model(input_ids=torch.tensor([ids]), pixel_values=pixels, output_hidden_states=True)
                for key in ("tower", "projector"):
                    per_image = got[key].float().mean(dim=1)  # (images, dim)
                    pad = torch.zeros(max_images - per_image.shape[0], per_image.shape[1])
                    rows[key].append(torch.cat([per_image, pad]).flatten())
                rows["lm"].append(out.hidden_states[-1][0, -1].float())
    finally:
        for h in hooks:
            h.remove()
    return {k: torch.stack(v) for k, v in rows.items()}


def fit_probe(x_train, y_train: list[str], x_eval, y_eval: list[str], l2: float = 1e-3) -> float:
    """Held-out accuracy of a multinomial logistic regression on standardised features."""
    import torch

    classes = sorted(set(y_train) | set(y_eval))
    yt = torch.tensor([classes.index(y) for y in y_train])
    ye = torch.tensor([classes.index(y) for y in y_eval])
    mu, sd = x_train.mean(0), x_train.std(0).clamp(min=1e-6)
    xt, xe = (x_train - mu) / sd, (x_eval - mu) / sd
    w = torch.zeros(xt.shape[1], len(classes), requires_grad=True)
    b = torch.zeros(len(classes), requires_grad=True)
    opt = torch.optim.LBFGS([w, b], lr=1, max_iter=500, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(xt @ w + b, yt) + l2 * (w * w).sum()
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        return float(((xe @ w + b).argmax(1) == ye).float().mean())


def probe_job(model_name: str, task_id: str, sizes: tuple[int, ...], eval_items: int) -> dict:
    import torch

    from drake_bench.evaluation.scoring import score_batch
    from drake_bench.models import load_base, predict

    torch.set_num_threads(1)
    model, proc = load_base(model_name)
    model.eval()
    train = _items(task_id, max(sizes), TRAIN_SEED + _client_of(task_id))
    held = _items(task_id, eval_items, EVAL_SEED)
    max_images = max(len(s.images) for s in train + held)
    ft, fe = features(model, proc, train, max_images), features(model, proc, held, max_images)
    yt, ye = [_label(s) for s in train], [_label(s) for s in held]
    probes = {
        f"{point}@{n}": fit_probe(ft[point][:n], yt[:n], fe[point], ye)
        for point in ("tower", "projector", "lm")
        for n in sizes
    }
    zero_shot = statistics.fmean(score_batch(predict(model, proc, [s.as_query() for s in held]), held))
    counts = {c: ye.count(c) for c in set(ye)}
    return {
        "kind": "probe",
        "model": model_name,
        "weights": _weights_identity(model_name),
        "task": task_id,
        "answer_type": held[0].answer_type.value,
        "options": len(held[0].choices) or 2,
        "majority": max(counts.values()) / len(ye),
        "zero_shot": zero_shot,
        "probes": probes,
    }


# --------------------------------------------------------------------------- fine-tuning


def _training_stream(task_id: str, variant: Variant, n: int) -> list:
    if not variant.mixed:
        return _items(task_id, n, TRAIN_SEED + _client_of(task_id))
    client = _client_of(task_id)
    tasks = list(_bench().client(client).tasks)
    per = n // len(tasks) + 1
    pools = [_items(t, per, TRAIN_SEED + client) for t in tasks]
    return [pool[i] for i in range(per) for pool in pools][:n]


def _letter_accuracy(model, proc, items: list) -> float:
    """Accuracy when the scored texts are the option letters (the letter read-out's own scoring)."""
    import drake_bench.models.engine as engine
    import drake_bench.models.prompting as prompting
    from drake_bench.models.engine import choice_scores
    from drake_bench.models.prompting import LETTERS, answer_letter

    original = engine.candidate_targets
    engine.candidate_targets = lambda s: [" " + LETTERS[i] for i in range(len(prompting.options(s)))]
    try:
        scores = choice_scores(model, proc, [s.as_query() for s in items])
    finally:
        engine.candidate_targets = original
    hits = [
        max(range(len(sc)), key=lambda i: (sc[i], -i)) == LETTERS.index(answer_letter(s))
        for s, sc in zip(items, scores)
    ]
    return statistics.fmean(hits)


def _accuracy(model, proc, items: list, letter: bool) -> float:
    from drake_bench.evaluation.scoring import score_batch
    from drake_bench.models import predict

    if letter:
        return _letter_accuracy(model, proc, items)
    return statistics.fmean(score_batch(predict(model, proc, [s.as_query() for s in items]), items))


def finetune_job(
    model_name: str, task_id: str, name: str, steps: tuple[int, ...], batch: int, eval_items: int, seed: int = 0
) -> dict:
    import torch
    from peft import get_peft_model

    import drake_bench.models.engine as engine
    import drake_bench.models.prompting as prompting
    from drake_bench.methods.lora_clients import LoraSettings
    from drake_bench.models import load_base, lora_config, train_step

    variant = VARIANTS[name]
    torch.set_num_threads(1)
    settings = LoraSettings()
    lr = variant.learning_rate or settings.learning_rate
    base, proc = load_base(model_name)
    torch.manual_seed(seed)
    rank = variant.rank or settings.rank
    config = lora_config(
        r=rank, alpha=settings.alpha * rank // settings.rank, modules_to_save=list(variant.modules_to_save) or None
    )
    model = get_peft_model(base, config)
    if not variant.lora:
        for n_, p in model.named_parameters():
            if "lora_" in n_:
                p.requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=settings.weight_decay)
    warm = variant.warmup_steps
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda done: min(1.0, (done + 1) / warm) if warm else 1.0)
    stream = _training_stream(task_id, variant, max(steps) * batch)
    held = _items(task_id, eval_items, EVAL_SEED)
    seen = [s for s in stream if s.task_id == task_id][:eval_items]
    if variant.letter:  # the letter is trained on: the target function reads the answer's letter
        original_target = engine.target
        engine.target = lambda s: " " + prompting.answer_letter(s) if prompting.is_choice(s) else original_target(s)
    points, losses, t0 = [], [], time.time()
    for step in range(1, max(steps) + 1):
        chunk = stream[(step - 1) * batch : step * batch]
        if variant.item_mean:
            losses.append(_item_mean_step(model, proc, chunk, opt, variant.max_grad_norm))
        else:
            losses.append(train_step(model, proc, chunk, opt, max_grad_norm=variant.max_grad_norm))
        schedule.step()
        if step in steps:
            points.append(
                {
                    "steps": step,
                    "held_out": _accuracy(model, proc, held, variant.letter),
                    "training_items": _accuracy(model, proc, seen, variant.letter),
                    "loss": statistics.fmean(losses[-max(1, step // 10) :]),
                }
            )
    return {
        "kind": "finetune",
        "model": model_name,
        "weights": _weights_identity(model_name),
        "task": task_id,
        "variant": name,
        "variant_settings": asdict(variant),
        "learning_rate": lr,
        "batch": batch,
        "seed": seed,
        "trainable": sum(p.numel() for p in params),
        "loss_first": statistics.fmean(losses[: max(1, len(losses) // 10)]),
        "points": points,
        "seconds": round(time.time() - t0, 1),
    }


def _item_mean_step(model, proc, batch: list, opt, max_grad_norm: float | None) -> float:
    """One step whose loss weighs every item alike (the mean of each item's mean token loss), where the engine's
    :func:`~drake_bench.models.engine.loss_on` weighs every answer token alike, so that an item with a two-token
    answer (" yes" + eos) counts as much as one with ten."""
    import torch

    from drake_bench.models.engine import answer_logits

    model.train()
    logits, targets, counts = answer_logits(model, proc, batch, packed=True)
    nll = torch.nn.functional.cross_entropy(logits.float(), targets, reduction="none")
    loss = torch.stack([part.mean() for part in torch.split(nll, counts)]).mean()
    loss.backward()
    if max_grad_norm is not None:
        torch.nn.utils.clip_grad_norm_([p for g in opt.param_groups for p in g["params"]], max_grad_norm)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return float(loss.detach())


# --------------------------------------------------------------------------- answer vocabulary


def vocabulary_job(model_name: str, task_id: str, items: int = 60) -> dict:
    """Which of a task's answer tokens the pretraining never trained, and how alike their output rows are.

    A token that was never a pretraining input keeps its initial embedding, whose norm is about
    ``initializer_range * sqrt(hidden)``; its output row, never a target either, only ever had the softmax push it down
    along the mean hidden state, the same direction for every such token. Counted on the option texts (choice items)
    or answers (open items) of ``items`` fresh items."""
    import torch

    from drake_bench.models import load_base

    model, proc = load_base(model_name)
    tok = proc.tokenizer
    text_cfg = getattr(model.config, "text_config", model.config)
    init_norm = float(text_cfg.initializer_range) * float(text_cfg.hidden_size) ** 0.5
    emb = model.get_input_embeddings().weight.detach().float()
    head = model.get_output_embeddings().weight.detach().float()
    texts = sorted({t.strip() for s in _items(task_id, items, TRAIN_SEED) for t in (s.choices or [s.answer])})
    ids = sorted({i for t in texts for i in tok(" " + t, add_special_tokens=False)["input_ids"]})
    norms = emb[ids].norm(dim=1)
    untrained = [i for i, n in zip(ids, norms.tolist()) if abs(n - init_norm) < 0.25 * init_norm]
    first = sorted({tok(" " + t, add_special_tokens=False)["input_ids"][0] for t in texts})
    rows = torch.nn.functional.normalize(head[first], dim=1)
    cos = rows @ rows.T
    off = cos[~torch.eye(len(first), dtype=torch.bool)]
    return {
        "kind": "vocabulary",
        "model": model_name,
        "task": task_id,
        "answer_type": _items(task_id, 1, TRAIN_SEED)[0].answer_type.value,
        "answer_tokens": len(ids),
        "untrained_tokens": len(untrained),
        "untrained_examples": tok.convert_ids_to_tokens(untrained[:4]),
        "init_norm": init_norm,
        "first_token_row_cosine": float(off.mean()) if len(off) else None,
    }


# --------------------------------------------------------------------------- records and report


def _key(rec: dict) -> tuple:
    return (rec["kind"], rec["model"], rec["task"], rec.get("variant"), rec.get("seed"))


def read_records(out: Path) -> list[dict]:
    path = out / "records.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _run(jobs: list[tuple], out: Path, workers: int) -> None:
    done = {_key(r) for r in read_records(out)}
    todo = [j for j in jobs if j[0] not in done]
    print(
        f"{len(jobs) - len(todo)} of {len(jobs)} jobs already in {out / 'records.jsonl'}; {len(todo)} to run",
        flush=True,
    )
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(fn, *args) for _key_, fn, args in todo]
        for i, fut in enumerate(futures, 1):
            rec = fut.result()
            with (out / "records.jsonl").open("a") as fh:
                fh.write(json.dumps(rec, sort_keys=True) + "\n")
            print(
                f"[{i}/{len(todo)}] {rec['kind']} {rec['task']} {rec.get('variant', '')} ({time.time() - t0:.0f} s)",
                flush=True,
            )


def _pct(x: float | None) -> str:
    return "" if x is None else f"{100 * x:.0f}"


def report(out: Path) -> str:
    recs = read_records(out)
    probes = {r["task"]: r for r in recs if r["kind"] == "probe"}
    tunes = [r for r in recs if r["kind"] == "finetune"]
    lines = [
        "# Diagnosis records",
        "",
        f"Written by `python scripts/diagnose_embedded_model.py report --out {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}` "
        "from `records.jsonl` (every job's record). Accuracies x100 on held-out fresh items.",
        "",
    ]
    if probes:
        sizes = sorted({int(k.split("@")[1]) for r in probes.values() for k in r["probes"]})
        head = ["task", "type", "majority", "zero-shot"] + [
            f"{p} @{n}" for p in ("tower", "projector", "lm") for n in sizes
        ]
        lines += [
            "## What the frozen model knows: linear probes",
            "",
            "| " + " | ".join(head) + " |",
            "|" + "|".join([":---"] + ["---:"] * (len(head) - 1)) + "|",
        ]
        for t, r in probes.items():
            cells = [t, r["answer_type"], _pct(r["majority"]), _pct(r["zero_shot"])]
            cells += [_pct(r["probes"].get(f"{p}@{n}")) for p in ("tower", "projector", "lm") for n in sizes]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    vocab = [r for r in recs if r["kind"] == "vocabulary"]
    if vocab:
        lines += [
            "## The answer vocabulary: tokens the pretraining never trained",
            "",
            "Per client task: its answer tokens (option texts or answers of 60 fresh items), how many keep their "
            "initial input embedding (never a pretraining input), and the mean cosine between the output rows "
            "of the options' first tokens (1: the model cannot tell them apart at its output).",
            "",
            "| task | type | answer tokens | never trained | e.g. | first-token output rows, mean cosine |",
            "|:---|:---|---:|---:|:---|---:|",
        ]
        for r in vocab:
            cos = "" if r["first_token_row_cosine"] is None else f"{r['first_token_row_cosine']:.3f}"
            eg = ", ".join(f"`{t}`" for t in r["untrained_examples"])
            lines.append(
                f"| {r['task']} | {r['answer_type']} | {r['answer_tokens']} | {r['untrained_tokens']} | {eg} | {cos} |"
            )
        lines.append("")
    if tunes:
        variants = list(dict.fromkeys(r["variant"] for r in tunes))
        steps = sorted({p["steps"] for r in tunes for p in r["points"]})
        lines += [
            "## What fine-tuning makes it say",
            "",
            "Held-out accuracy / accuracy on its own training items, by step count.",
            "",
        ]
        for s in steps:
            head = ["task", "probe (tower @200)"] + variants
            lines += [
                f"### after {s} steps",
                "",
                "| " + " | ".join(head) + " |",
                "|" + "|".join([":---"] + ["---:"] * (len(head) - 1)) + "|",
            ]
            for t in dict.fromkeys(r["task"] for r in tunes):
                cells = [t, _pct(probes.get(t, {}).get("probes", {}).get("tower@200"))]
                for v in variants:
                    rec = next((r for r in tunes if r["task"] == t and r["variant"] == v), None)
                    pt = next((p for p in rec["points"] if p["steps"] == s), None) if rec else None
                    cells.append(f"{_pct(pt['held_out'])} / {_pct(pt['training_items'])}" if pt else "")
                lines.append("| " + " | ".join(cells) + " |")
            lines.append("")
        lines += [
            "Losses (first tenth -> last tenth of the steps) and trainable parameters:",
            "",
            "| task | variant | trainable | loss first | loss last | seconds |",
            "|:---|:---|---:|---:|---:|---:|",
        ]
        for r in tunes:
            lines.append(
                f"| {r['task']} | {r['variant']} | {r['trainable']:,} | {r['loss_first']:.3f} | "
                f"{r['points'][-1]['loss']:.3f} | {r['seconds']:.0f} |"
            )
        lines.append("")
    text = "\n".join(lines)
    (out / "diagnosis.md").write_text(text)
    (out / "diagnosis.json").write_text(json.dumps({"probes": probes, "finetune": tunes}, indent=1, sort_keys=True))
    return text


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("probe", "finetune", "vocabulary", "report"))
    ap.add_argument("--model", default="tiny-llava-llama-m")
    ap.add_argument("--tasks", default=",".join(FOCUS_TASKS), help="comma-separated task ids, or 'all'")
    ap.add_argument("--probe-items", default="200,2000", help="training items of the probes (comma-separated)")
    ap.add_argument("--eval-items", type=int, default=200, help="held-out items per task")
    ap.add_argument("--variants", default="reference,mixed 4 tasks", help=f"comma-separated, of {list(VARIANTS)}")
    ap.add_argument("--steps", default="200,800", help="step counts at which fine-tuned models are scored")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    tasks = choice_tasks() if args.tasks == "all" else args.tasks.split(",")
    unknown = [v for v in args.variants.split(",") if v not in VARIANTS]
    if unknown:
        ap.error(f"unknown variants {unknown}; known: {list(VARIANTS)}")
    if args.what == "probe":
        sizes = tuple(int(x) for x in args.probe_items.split(","))
        jobs = [
            (("probe", args.model, t, None, None), probe_job, (args.model, t, sizes, args.eval_items)) for t in tasks
        ]
        _run(jobs, args.out, args.workers)
    elif args.what == "vocabulary":
        from drake_bench.benchmarks.manifest import load_benchmark

        every = [t for c in load_benchmark(BENCH).clients for t in c.tasks] if args.tasks == "all" else tasks
        jobs = [(("vocabulary", args.model, t, None, None), vocabulary_job, (args.model, t)) for t in every]
        _run(jobs, args.out, args.workers)
    elif args.what == "finetune":
        steps = tuple(int(x) for x in args.steps.split(","))
        jobs = [
            (("finetune", args.model, t, v, 0), finetune_job, (args.model, t, v, steps, args.batch, args.eval_items))
            for v in args.variants.split(",")
            for t in tasks
        ]
        _run(jobs, args.out, args.workers)
    print(report(args.out))


if __name__ == "__main__":
    main()
