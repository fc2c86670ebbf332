"""The shared tiny vision tower: the stand-in for the CLIP encoder all LLaVA-1.5 checkpoints share.

Real LLaVA-1.5 models of every size reuse one CLIP ViT-L/14, pretrained on 400M image-text pairs and
kept frozen while the projector and the language model are trained. The tiny zoo does the same in
miniature: one tower is trained once on the synthetic world's public pictures, saved with
``save_pretrained`` and copied into every tiny LLaVA, which keeps it frozen.

**Why a Swin tower.** The tower is a ``transformers`` ``SwinModel`` (loaded through the Auto classes
inside ``LlavaForConditionalGeneration``, read at its last layer with every token kept, strategy
"full"): 4 px patches at the images' native 64 px, windowed attention over 4 x 4 patches and two patch
mergings, so its 16 output tokens each describe one 16 x 16 px cell. A plain CLIP ViT of the same budget
(8 px patches, 3-4 layers) did not learn to tell shapes apart: held-out shape accuracy 0.49 at 48 px
(recipe 6) and 0.27 at 64 px after 200 steps of this recipe, where the Swin tower reached 0.24 and then
far more with training (``docs/models.md`` has the probe table of the shipped tower). 16 tokens per
image also keep the language model's sequences short: a 5-image item costs 80 image tokens, not 180.

**What it learns** (what CLIP's pretraining gives a real tower: a representation of what is in the
picture, per region): on fresh public perception pictures
(:func:`~drake_bench.benchmarks.synth.public.perception_picture`: every shape, colour, size, drawn style, crack,
comic state mark, distortion and rendered text, in every visual domain), dense per-token targets (for
the object covering most of the token's cell: present, shape, colour, size, style, cracked, state),
per-image targets (object count, visual domain, distortion, text; from the mean token) and presence
targets (which shapes and colours, anything cracked / shining / shaking; from the max over tokens)
through linear heads that are thrown away. Every label is read from the token LLaVA reads, so the language model sees each region's
content directly.

**How it is checked.** :func:`probe_tower` fits linear probes on frozen features of held-out pictures
(a separate random stream) and reports each attribute's accuracy: per object from the token of its
cell, per image from the mean token, position from all tokens.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from drake_bench.models.cache import RECIPE_FILE, VISION_DIR, build_cached, models_home, progress_dir

GRID = 4
"""The tower's output is a GRID x GRID map of tokens (64 px / 16 px)."""
CELL = 64 // GRID
TOKEN_HEADS: tuple[str, ...] = ("present", "shape", "color", "size", "style", "cracked", "state")
IMAGE_HEADS: tuple[str, ...] = ("count", "domain", "distortion", "text")
MAX_COUNT = 4
IGNORE = -100


def token_vocabularies() -> list[list[str]]:
    from drake_bench.benchmarks.synth.world import COLORS, SHAPES, SIZES, STATES, STYLES

    return [["no", "yes"], list(SHAPES), list(COLORS), list(SIZES), list(STYLES), ["no", "yes"], list(STATES)]


def image_vocabularies() -> list[list[str]]:
    from drake_bench.benchmarks.synth.public import PERCEPTION_DOMAINS, PERCEPTION_TEXTS
    from drake_bench.benchmarks.synth.world import DISTORTIONS

    return [
        [str(k) for k in range(MAX_COUNT + 1)],
        list(PERCEPTION_DOMAINS),
        ["none", *DISTORTIONS],
        ["none", *PERCEPTION_TEXTS],
    ]


def cell_of(obj: Any) -> int:
    """Index of the token whose 16 px cell holds the object's centre (row-major, as Swin orders them)."""
    return min(GRID - 1, obj.y // CELL) * GRID + min(GRID - 1, obj.x // CELL)


def object_labels(obj: Any, domain: str) -> list[int]:
    """Class ids of one object for the token heads after "present" (the paper domain draws outlines only)."""
    style = "outlined" if domain == "paper" else obj.style
    values = [obj.shape, obj.color, obj.size, style, "yes" if obj.cracked else "no", obj.state]
    return [vocab.index(v) for vocab, v in zip(token_vocabularies()[1:], values)]


def _overlap(obj: Any, cell: int) -> int:
    """Pixels shared by a cell and the object's bounding square."""
    from drake_bench.benchmarks.synth.world import SIZES

    r, top, left = SIZES[obj.size], (cell // GRID) * CELL, (cell % GRID) * CELL
    w = min(left + CELL, obj.x + r + 1) - max(left, obj.x - r)
    h = min(top + CELL, obj.y + r + 1) - max(top, obj.y - r)
    return max(0, w) * max(0, h)


def token_targets(picture: Any) -> torch.Tensor:
    """(GRID*GRID, len(TOKEN_HEADS)) class ids of the object covering most of each cell (>= 16 px of its
    bounding square); cells without one: present 0, the rest ignored. Every cell an object covers is
    labelled, not only the cell of its centre, so each token learns from the part of the object it sees."""
    out = torch.full((GRID * GRID, len(TOKEN_HEADS)), IGNORE, dtype=torch.long)
    out[:, 0] = 0
    for cell in range(GRID * GRID):
        best = max(picture.scene.objects, key=lambda o: _overlap(o, cell), default=None)
        if best is not None and _overlap(best, cell) >= 16:
            out[cell] = torch.tensor([1, *object_labels(best, picture.domain)])
    return out


def presence_targets(picture: Any) -> torch.Tensor:
    """Multi-hot: which shapes and colours are in the picture, whether anything is cracked, shining, shaking.

    Read from the max over tokens: a translation-invariant signal that teaches shape detectors quickly
    (dense per-cell targets alone learn shapes several times slower)."""
    from drake_bench.benchmarks.synth.world import COLORS, SHAPES

    v = torch.zeros(len(SHAPES) + len(COLORS) + 3)
    for o in picture.scene.objects:
        v[SHAPES.index(o.shape)] = 1
        v[len(SHAPES) + list(COLORS).index(o.color)] = 1
        v[-3] = max(float(v[-3]), float(o.cracked))
        v[-2] = max(float(v[-2]), float(o.state == "shining"))
        v[-1] = max(float(v[-1]), float(o.state == "shaking"))
    return v


def image_targets(picture: Any) -> list[int]:
    sc = picture.scene
    values = [str(min(len(sc.objects), MAX_COUNT)), picture.domain, sc.distortion or "none", sc.text or "none"]
    return [vocab.index(v) for vocab, v in zip(image_vocabularies(), values)]


def tower_tokens(tower: Any, pixels: torch.Tensor) -> torch.Tensor:
    """The tokens LLaVA reads: the tower's last hidden state, every token (strategy "full", layer -1)."""
    return tower(pixels, output_hidden_states=True).hidden_states[-1]


class PerceptionHeads(torch.nn.Module):
    """Throw-away linear heads: per-token object attributes and per-image attributes."""

    def __init__(self, width: int, shape_weight: float = 1.0):
        super().__init__()
        self.shape_weight = shape_weight  # shapes are the slowest attribute to learn: their loss can weigh more
        self.token_sizes = [len(v) for v in token_vocabularies()]
        self.image_sizes = [len(v) for v in image_vocabularies()]
        self.tokens = torch.nn.Linear(width, sum(self.token_sizes))
        self.images = torch.nn.Linear(width, sum(self.image_sizes))
        self.presence = torch.nn.Linear(width, _presence_size())

    def loss(
        self, tokens: torch.Tensor, token_y: torch.Tensor, image_y: torch.Tensor, presence_y: torch.Tensor
    ) -> torch.Tensor:
        ce = torch.nn.functional.cross_entropy
        from drake_bench.benchmarks.synth.world import SHAPES

        weight = torch.ones(presence_y.shape[1])
        weight[: len(SHAPES)] = self.shape_weight
        total = (
            torch.nn.functional.binary_cross_entropy_with_logits(
                self.presence(tokens).max(1).values, presence_y, weight=weight
            )
            * presence_y.shape[1]
            / 4
        )
        for j, logits in enumerate(self.tokens(tokens).split(self.token_sizes, -1)):
            w = self.shape_weight if TOKEN_HEADS[j] == "shape" else 1.0
            total = total + w * ce(
                logits.reshape(-1, logits.shape[-1]), token_y[..., j].reshape(-1), ignore_index=IGNORE
            )
        for j, logits in enumerate(self.images(tokens.mean(1)).split(self.image_sizes, -1)):
            total = total + ce(logits, image_y[:, j])
        return total


def _presence_size() -> int:
    from drake_bench.benchmarks.synth.world import COLORS, SHAPES

    return len(SHAPES) + len(COLORS) + 3


def pixels_of(image_processor: Any, images: Sequence[Any]) -> torch.Tensor:
    return image_processor(list(images), return_tensors="pt")["pixel_values"]


@torch.no_grad()
def frozen_tokens(tower: Any, image_processor: Any, images: Sequence[Any], chunk: int = 256) -> torch.Tensor:
    """:func:`tower_tokens` of many images with the tower in eval mode, ``chunk`` images at a time."""
    tower.eval()
    device = next(tower.parameters()).device
    return torch.cat(
        [
            tower_tokens(tower, pixels_of(image_processor, images[i : i + chunk]).to(device))
            for i in range(0, len(images), chunk)
        ]
    )


def targets(pictures: Sequence[Any]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Token, image and presence targets of a batch of pictures (what :meth:`PerceptionHeads.loss` takes)."""
    return (
        torch.stack([token_targets(p) for p in pictures]),
        torch.tensor([image_targets(p) for p in pictures]),
        torch.stack([presence_targets(p) for p in pictures]),
    )


def warmup_cosine(step: int, steps: int, warmup: int) -> float:
    """Learning-rate factor: linear warm-up, then cosine decay to 10%."""
    if step < warmup:
        return (step + 1) / warmup
    t = (step - warmup) / max(1, steps - warmup)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t))


def train_tower(
    tower: Any,
    image_processor: Any,
    recipe: Any,
    seed: int = 0,
    *,
    resume_dir: Path | None = None,
    snapshot_every: int = 250,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Train ``tower`` in place on perception pictures (module docstring); returns the loss curve.

    Single-threaded, data drawn by step index: same recipe, same weights. With ``resume_dir`` a snapshot
    is kept every ``snapshot_every`` steps and an interrupted run continues from it to the identical result.
    """
    from drake_bench.benchmarks.synth.public import perception_pictures
    from drake_bench.models.resume import load_progress, save_progress

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed + 15485863)
            heads = PerceptionHeads(tower.config.hidden_size, recipe.tower_shape_weight)
        params = [*tower.parameters(), *heads.parameters()]
        n_single = round(recipe.tower_batch * recipe.tower_single_fraction)
        n_mixed = recipe.tower_batch - n_single
        opt = torch.optim.AdamW(params, lr=recipe.tower_lr, weight_decay=0.0)
        modules = {"tower": tower, "heads": heads}
        start, extra = load_progress(resume_dir, modules, opt) if resume_dir else (0, {})
        losses: list[float] = list(extra.get("losses", []))
        tower.requires_grad_(True)
        tower.train()
        warm = min(100, recipe.tower_steps // 10 + 1)
        t0 = time.perf_counter()
        for step in range(start, recipe.tower_steps):
            for group in opt.param_groups:
                group["lr"] = recipe.tower_lr * warmup_cosine(step, recipe.tower_steps, warm)
            pictures = perception_pictures(step * n_mixed, n_mixed, recipe.data_seed)
            if n_single:
                pictures += perception_pictures(step * n_single, n_single, recipe.data_seed, single=True)
            pixels = pixels_of(image_processor, [p.image for p in pictures])
            loss = heads.loss(tower_tokens(tower, pixels), *targets(pictures))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            losses.append(round(float(loss.detach()), 5))
            done = step + 1
            if resume_dir and done % snapshot_every == 0 and done < recipe.tower_steps:
                save_progress(resume_dir, done, modules, opt, {"losses": losses})
            if progress and (done % 100 == 0 or done == recipe.tower_steps):
                progress(
                    f"vision tower: step {done}/{recipe.tower_steps}, loss {losses[-1]:.3f}, "
                    f"{time.perf_counter() - t0:.0f} s"
                )
    finally:
        torch.set_num_threads(threads)
        tower.requires_grad_(False)
        tower.eval()
    return {"losses": losses}


# ---------------------------------------------------------------------- linear probes
def _fit_probe(x: torch.Tensor, y: torch.Tensor, classes: int, n_train: int, steps: int = 300) -> float | None:
    """Held-out accuracy of a linear (softmax) probe fitted on the first ``n_train`` rows (None: too few rows)."""
    if n_train < 2 or len(x) - n_train < 2:
        return None
    mu, sd = x[:n_train].mean(0), x[:n_train].std(0) + 1e-5
    x = (x - mu) / sd
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        probe = torch.nn.Linear(x.shape[1], classes)
    opt = torch.optim.Adam(probe.parameters(), lr=1e-2)
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(probe(x[:n_train]), y[:n_train]).backward()
        opt.step()
    with torch.no_grad():
        return round(float((probe(x[n_train:]).argmax(1) == y[n_train:]).float().mean()), 4)


def probe_tower(tower: Any, image_processor: Any, n: int = 2000, seed: int = 1) -> dict[str, Any]:
    """Linear-probe accuracy of frozen tower features on ``n`` held-out perception pictures.

    Pictures come from seed ``seed`` of the perception stream (the tower trains on seed 0), 3/4 fit the
    probe and 1/4 score it. Per object (every object of every picture), from the token of the object's
    cell: shape, colour, size, style, cracked, state. Per image, from the mean token: count, domain,
    distortion, text (pictures with text only: which text). Position (single-object pictures: which
    quadrant), from all tokens. Returns ``{"accuracy": {attribute: acc}, "chance": {...}, "n": {...}}``.
    """
    from drake_bench.benchmarks.synth.public import perception_pictures

    pictures = perception_pictures(10**7, n, seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        feats = frozen_tokens(tower, image_processor, [p.image for p in pictures], chunk=200)
        rows, labels = [], []
        for k, p in enumerate(pictures):
            for obj in p.scene.objects:
                rows.append(feats[k, cell_of(obj)])
                labels.append(object_labels(obj, p.domain))
        x, y = torch.stack(rows), torch.tensor(labels)
        acc: dict[str, float] = {}
        chance: dict[str, float] = {}
        counts: dict[str, int] = {}
        names = ("shape", "color", "size", "style", "cracked", "state")
        for j, name in enumerate(names):
            acc[name] = _fit_probe(x, y[:, j], len(token_vocabularies()[j + 1]), int(0.75 * len(x)))
            chance[name] = _majority(y[int(0.75 * len(x)) :, j])
            counts[name] = len(x)
        mean = feats.mean(1)
        image_y = torch.tensor([image_targets(p) for p in pictures])
        for j, name in enumerate(IMAGE_HEADS):
            rows_j = torch.arange(n) if name != "text" else (image_y[:, 3] > 0).nonzero().flatten()
            split = int(0.75 * len(rows_j))
            acc[name] = _fit_probe(mean[rows_j], image_y[rows_j, j], len(image_vocabularies()[j]), split)
            chance[name] = _majority(image_y[rows_j[split:], j])
            counts[name] = len(rows_j)
        single = [k for k, p in enumerate(pictures) if len(p.scene.objects) == 1]
        quad = torch.tensor(
            [int(pictures[k].scene.objects[0].x >= 32) + 2 * int(pictures[k].scene.objects[0].y >= 32) for k in single]
        )
        acc["position"] = _fit_probe(feats[single].flatten(1), quad, 4, int(0.75 * len(single)))
        chance["position"] = _majority(quad[int(0.75 * len(single)) :])
        counts["position"] = len(single)
    finally:
        torch.set_num_threads(threads)
    return {"accuracy": acc, "chance": chance, "n": counts}


def _majority(y: torch.Tensor) -> float | None:
    if len(y) == 0:
        return None
    return round(float(np.bincount(y.numpy()).max() / max(1, len(y))), 4)


# ---------------------------------------------------------------------- cache entry
def _record(recipe: Any) -> dict[str, Any]:
    from drake_bench.models.zoo import VISION_TOWER

    fields = recipe.as_dict()  # leaves out optional fields at their defaults, so older records still match
    keys = (
        "tower_steps",
        "tower_batch",
        "tower_lr",
        "data_seed",
        "probe_pictures",
        "version",
        "tower_single_fraction",
        "tower_shape_weight",
    )
    return {"tower": dict(VISION_TOWER), **{k: fields[k] for k in keys if k in fields}}


def ensure_vision_tower(recipe: Any, progress: Callable[[str], None] | None = None) -> Path:
    """Directory of the shared pretrained tower for ``recipe`` (trained once, then cached; resumable)."""
    from transformers import AutoModel

    from drake_bench.models.tokenizer import make_image_processor
    from drake_bench.models.zoo import vision_config

    path = models_home() / VISION_DIR

    def build(tmp: Path) -> dict[str, Any]:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(recipe.data_seed + 86028121)
            tower = AutoModel.from_config(vision_config())
        report = train_tower(
            tower, make_image_processor(), recipe, resume_dir=progress_dir(path, record), progress=progress
        )
        report["probe"] = probe_tower(tower, make_image_processor(), n=recipe.probe_pictures)
        tower.save_pretrained(tmp)
        return report

    record = _record(recipe)
    return build_cached(path, record, build)


def install_tower(model: Any, path: Path) -> None:
    """Copy the shared tower's weights into a tiny LLaVA (same vision design) and freeze them."""
    from transformers import AutoModel

    shared = AutoModel.from_pretrained(path)
    model.model.vision_tower.load_state_dict(shared.state_dict())
    model.model.vision_tower.requires_grad_(False)


def tower_report(path: Path) -> dict[str, Any]:
    """The cached tower's record: recipe, loss curve and held-out probe accuracies."""
    return json.loads((Path(path) / RECIPE_FILE).read_text())
