"""Learnability benchmark of the synth image tasks (not a test): is each task learnable, and only with the image?

For every image task of drake-synth and hflb-synth, trains from scratch on generated items
  * two small probes over every image + the bag of question/option words ("vision"): late fusion
    (per-image CNN, concatenated) and FiLM (question-conditioned CNN); the better one is reported,
  * the same probes with the images blanked ("text_only", the better of the two),
and reports test accuracy (exact answer match) next to chance (1/#options, or the majority
answer for open tasks). Writes drake_bench/synth/learnability.json (read by task cards) and
the table in docs/synth_tasks.md.

    python scripts/bench_synth_learnability.py            # all image tasks (several minutes on 2 cores)
    python scripts/bench_synth_learnability.py --tasks rel-spatial icon-clock --train 300
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch
from torch import nn

from drake_bench.manifest import load_benchmark
from drake_bench.sample import AnswerType
from drake_bench.synth.registry import get_generator

ROOT = Path(__file__).resolve().parents[1]
OUT_JSON = ROOT / "drake_bench" / "synth" / "learnability.json"
DOCS = ROOT / "docs" / "synth_tasks.md"
MAX_IMAGES = 5


def tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


class LateFusion(nn.Module):
    """Per-image CNN (shared weights, slot position kept) + bag of question/option words -> answer class."""

    def __init__(self, vocab: int, classes: int, use_images: bool):
        super().__init__()
        self.use_images = use_images
        self.cnn = nn.Sequential(
            nn.Conv2d(3, 16, 3, 2, 1), nn.ReLU(), nn.Conv2d(16, 32, 3, 2, 1), nn.ReLU(),
            nn.Flatten(), nn.Linear(32 * 8 * 8, 64), nn.ReLU(),
        )
        self.words = nn.EmbeddingBag(vocab, 64, mode="mean")
        self.head = nn.Sequential(nn.Linear(64 * MAX_IMAGES + 64, 128), nn.ReLU(), nn.Linear(128, classes))

    def forward(self, imgs: torch.Tensor, words: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        b = imgs.shape[0]
        feats = self.cnn(imgs.flatten(0, 1)).view(b, MAX_IMAGES, -1)
        if not self.use_images:
            feats = torch.zeros_like(feats)
        return self.head(torch.cat([feats.flatten(1), self.words(words, offsets)], dim=1))


PROBES: dict[str, type] = {}


class FiLM(nn.Module):
    """FiLM probe (Perez et al. 2018, the standard probe for synthetic visual reasoning such as CLEVR).

    The bag of question/option words produces per-channel scale and shift for every conv layer, so the
    image features are computed *for the question* (needed by relational questions: "is the red circle
    left of the blue square?"); a shared CNN runs per image, image features keep their slot position
    (multi-image tasks compare images), and the head sees them with the question embedding.
    ``use_images=False`` blanks the images: the same model, text only.
    """

    def __init__(self, vocab: int, classes: int, use_images: bool, width: int = 32):
        super().__init__()
        self.use_images = use_images
        self.words = nn.EmbeddingBag(vocab, 64, mode="mean")
        self.convs = nn.ModuleList([nn.Conv2d(3, width, 3, 2, 1), nn.Conv2d(width, width, 3, 2, 1),
                                    nn.Conv2d(width, width, 3, 1, 1)])
        self.film = nn.Linear(64, 2 * width * len(self.convs))
        self.pool = nn.Sequential(nn.Flatten(), nn.Linear(width * 8 * 8, 64), nn.ReLU())
        self.head = nn.Sequential(nn.Linear(64 * MAX_IMAGES + 64, 128), nn.ReLU(), nn.Linear(128, classes))
        self.width = width

    def forward(self, imgs: torch.Tensor, words: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        b = imgs.shape[0]
        q = self.words(words, offsets)
        if not self.use_images:
            imgs = torch.zeros_like(imgs)
        gb = self.film(q).view(b, len(self.convs), 2, self.width)
        gb = gb.repeat_interleave(MAX_IMAGES, dim=0)  # one (gamma, beta) per image of the item
        x = imgs.flatten(0, 1)
        for k, conv in enumerate(self.convs):
            x = conv(x)
            x = torch.relu(x * (1 + gb[:, k, 0, :, None, None]) + gb[:, k, 1, :, None, None])
        feats = self.pool(x).view(b, MAX_IMAGES, -1)
        return self.head(torch.cat([feats.flatten(1), q], dim=1))


def encode(items, vocab: dict[str, int]):
    imgs = np.zeros((len(items), MAX_IMAGES, 3, 32, 32), dtype=np.float32)
    ids, offsets = [], []
    for i, it in enumerate(items):
        for k, im in enumerate(it.images[:MAX_IMAGES]):
            # 2x2 average pooling to 32 px: cheaper on CPU, objects stay several pixels wide
            a = np.asarray(im, dtype=np.float32).reshape(32, 2, 32, 2, 3).mean(axis=(1, 3))
            imgs[i, k] = a.transpose(2, 0, 1) / 255.0
        offsets.append(len(ids))
        ws = tokens(it.question) + [f"opt:{c}" for c in it.choices]
        ids += [vocab.setdefault(w, len(vocab)) for w in ws] or [0]
    return torch.from_numpy(imgs), torch.tensor(ids), torch.tensor(offsets)


PROBES.update(late=LateFusion, film=FiLM)


def train_eval(train, test, answers: list[str], use_images: bool, epochs: int, seed: int, probe: str = "late") -> float:
    torch.manual_seed(seed)
    vocab: dict[str, int] = {"<pad>": 0}
    xi, xw, xo = encode(train, vocab)
    ti, tw, to = encode(test, vocab)
    cls = {a: i for i, a in enumerate(answers)}
    y = torch.tensor([cls[it.answer] for it in train])
    yt = torch.tensor([cls.get(it.answer, -1) for it in test])
    net = PROBES[probe](len(vocab) + 1, len(answers), use_images)
    opt = torch.optim.Adam(net.parameters(), lr=2e-3)
    n = len(train)
    g = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        for idx in torch.randperm(n, generator=g).split(32):
            starts = xo[idx]
            ends = torch.where(idx + 1 < n, xo[(idx + 1).clamp(max=n - 1)], torch.tensor(len(xw)))
            words = torch.cat([xw[s:e] for s, e in zip(starts.tolist(), ends.tolist())])
            offs = torch.tensor([0] + list(np.cumsum((ends - starts).tolist())[:-1]))
            loss = nn.functional.cross_entropy(net(xi[idx], words, offs), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    net.eval()
    with torch.no_grad():
        logits = net(ti, tw, to)
    # restrict to the item's options for choice tasks (the evaluator scores by option)
    pred = []
    for i, it in enumerate(test):
        row = logits[i]
        if it.choices:
            allowed = [cls[c] for c in it.choices if c in cls]
            row = torch.full_like(row, -1e9).index_copy(0, torch.tensor(allowed), row[allowed])
        pred.append(int(row.argmax()))
    return float((torch.tensor(pred) == yt).float().mean())


def chance(train, test, answer_type: AnswerType) -> float:
    if answer_type in (AnswerType.MULTIPLE_CHOICE, AnswerType.YES_NO):
        return float(np.mean([1 / len(it.choices) for it in test]))
    top = Counter(it.answer for it in train).most_common(1)[0][0]
    return float(np.mean([it.answer == top for it in test]))


def run_task(bench: str, task_id: str, n_train: int, n_test: int, epochs: int) -> dict:
    spec = load_benchmark(bench)
    t = spec.task(task_id)
    gen = get_generator(t.source.variant)
    items = [gen.item(i, seed=12345, task_id=t.id) for i in range(n_train + n_test)]  # seed disjoint from the build
    train, test = items[:n_train], items[n_train:]
    answers = sorted({it.answer for it in items} | {c for it in items for c in it.choices})
    res = {
        "benchmark": bench, "task": task_id, "answer_type": t.answer_type.value, "train": n_train, "test": n_test,
        "metric": "exact-match accuracy", "chance": round(chance(train, test, t.answer_type), 3),
    }
    # two small probes (late fusion, FiLM); a task counts as learnable if either learns it, and the
    # text-only baseline is the better of the two blank-image variants (conservative)
    scores = {p: train_eval(train, test, answers, True, epochs, 0, p) for p in PROBES}
    best = max(scores, key=scores.get)
    res["probe"] = best
    res["vision"] = round(scores[best], 3)
    res["text_only"] = round(max(train_eval(train, test, answers, False, epochs, 0, p) for p in PROBES), 3)
    return res


def write_docs(results: dict) -> None:
    lines = [
        "# Embedded synthetic benchmarks: task table",
        "",
        "Generated by `scripts/bench_synth_learnability.py` (task list from `splits/*-synth.json`).",
        "`vision` = a small CNN + bag-of-words model trained on the task; `text` = the same model with blank",
        "images; `chance` = 1/#options (majority answer for open tasks). Exact-match test accuracy, trained from",
        f"scratch on {results.get('train', '?')} items, tested on {results.get('test', '?')} fresh items. A task is",
        "learnable and needs the image when `vision` beats both `text` and `chance` by at least 0.10 (`ok`);",
        "a task that does not is retried with 1,200 training items (`n`), and marked `no` if it still does not.",
        "Two probes are trained (late fusion: per-image CNN + bag of words; FiLM: question-conditioned CNN); the",
        "table shows the better one, and the better of their text-only (blank image) variants.",
        "Render any task's card and example grid with `drake-bench task-card BENCHMARK TASK --out card.png`.",
        "",
    ]
    for bench in ("drake-synth", "hflb-synth", "fedllm-synth"):
        spec = load_benchmark(bench)
        lines += [f"## {bench} (mirrors {spec.mirrors})", "", spec.description, ""]
        if spec.modality == "text":
            lines += ["| client | group | task 1 | task 2 |", "|---|---|---|---|"]
            for c in spec.clients:
                lines.append(f"| {c.id} | {c.group} | {c.tasks[0]} | {c.tasks[1]} |")
            lines += ["", "Text tasks are scored by Rouge-L; learnability is not measured by the image script.", ""]
            continue
        lines += ["| task | client/pos | group / split | imgs | answer | vision | text | chance | n | ok | description |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for t in spec.tasks:
            pos = next((f"{c.id}/{c.tasks.index(t.id) + 1}" for c in spec.clients if t.id in c.tasks), "unseen")
            r = results.get("tasks", {}).get(f"{bench}/{t.id}")
            nums = (f"{r['vision']:.2f} | {r['text_only']:.2f} | {r['chance']:.2f} | {r['train']} | "
                    f"{'yes' if r.get('learnable') else 'no'}") if r else "- | - | - | - | -"
            imgs = f"{t.num_images[0]}" if t.num_images[0] == t.num_images[1] else f"{t.num_images[0]}-{t.num_images[1]}"
            lines.append(f"| `{t.id}` | {pos} | {t.group} / {t.split} | {imgs} | {t.answer_type.value} | {nums} | {t.description} |")
        lines.append("")
    DOCS.parent.mkdir(parents=True, exist_ok=True)
    DOCS.write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", nargs="*", help="task ids (default: every image task)")
    ap.add_argument("--train", type=int, default=400)
    ap.add_argument("--test", type=int, default=150)
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--retry-train", type=int, default=1200,
                    help="items for a second try when the probe does not beat text-only and chance by --margin")
    ap.add_argument("--margin", type=float, default=0.1)
    ap.add_argument("--skip-done", action="store_true", help="keep tasks already in learnability.json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    old = json.loads(OUT_JSON.read_text()) if OUT_JSON.is_file() else {}
    results = {"train": args.train, "test": args.test, "epochs": args.epochs, "tasks": dict(old.get("tasks", {}))}
    todo = [(b, t.id) for b in ("drake-synth", "hflb-synth") for t in load_benchmark(b).tasks
            if not args.tasks or t.id in args.tasks]
    for bench, tid in todo:
        if args.skip_done and f"{bench}/{tid}" in results["tasks"]:
            continue
        t0 = time.time()
        r = run_task(bench, tid, args.train, args.test, args.epochs)
        if r["vision"] < max(r["text_only"], r["chance"]) + args.margin and args.retry_train > args.train:
            # relational tasks (compare counts / colours across images) need more data for a small probe
            r = run_task(bench, tid, args.retry_train, args.test, args.epochs)
        r["learnable"] = r["vision"] >= max(r["text_only"], r["chance"]) + args.margin
        results["tasks"][f"{bench}/{tid}"] = r
        print(f"{bench}/{tid:28s} vision {r['vision']:.2f}  text {r['text_only']:.2f}  chance {r['chance']:.2f}"
              f"  ({time.time() - t0:.1f}s)", flush=True)
        OUT_JSON.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    write_docs(results)
    print(f"wrote {OUT_JSON} and {DOCS}")


if __name__ == "__main__":
    main()
