"""Pretraining recipe: a short warm-up on the public mix so frozen bases carry real knowledge.

The papers fine-tune instruction-tuned LLaVA/Llama bases; a randomly initialised
tiny model would make every method look alike. So each tiny model is first trained
(all parameters) on the synthetic world's public data — the stand-in for
LLaVA-Instruct-158K — then saved with ``save_pretrained`` and from then on loaded
with ``from_pretrained``, the call path a user takes with a real checkpoint.

The recipe (the :class:`Recipe` defaults) runs once, in ``scripts/build_zoo.py`` (about 40 minutes on 2 CPU
cores, resumable), and its results ship with the package (:mod:`.shipped`); users never run it:

* tokenizer: byte-level BPE, at most 2,032 ids (16 of the models' 2,048 kept free), trained once on the synth corpus
  (``drake_bench.benchmarks.synth.public.corpus_texts``) plus the prompt scaffolding; shared by
  every tiny model;
* multimodal models, stage 0 (the stand-in for LLaVA's pretrained CLIP tower): one Swin vision tower at 64 px,
  trained once per recipe on perception pictures and shared by every tiny LLaVA, as LLaVA-1.5 models of every
  size share one CLIP (:mod:`drake_bench.models.vision` says what it learns and why Swin). It stays frozen in
  both stages below;
* multimodal models, stage 1 (vision alignment, LLaVA-1.5's first stage): the projector alone learns to keep
  what the tower perceives (:func:`align_vision`: the tower's own targets, read from the projected tokens
  through linear heads thrown away afterwards);
* multimodal models, stage 2 (every parameter but the tower): ``public_mix`` items (captions, lists, and
  multiple-choice, yes/no and open questions over one or several pictures about colour, shape, size, drawn
  style, position and count) with a quarter as many ``public_text_mix`` items; text models: ``public_text_mix``
  only (translations between English and the synthetic languages);
* AdamW (lr 3e-3, betas 0.9/0.98, no weight decay), linear warm-up then cosine decay
  to 10%, gradient clipping at 1.0, loss on answer tokens only (the engine's loss);
* batches drawn from a seeded shuffle, sorted by length inside windows of 8 batches
  (less padding) and taken in a seeded random order, same seed -> identical weights (single-threaded math on CPU).

Cache: ``models_home()/<name>`` (``-seed<k>`` appended for seed k != 0) holds the
checkpoint, its processor/tokenizer and ``drake_pretrain.json`` (recipe + loss curve).
A directory whose recipe differs from the current one is rebuilt.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from drake_bench.errors import DrakeBenchError
from drake_bench.models import engine
from drake_bench.models.cache import RECIPE_FILE, TOKENIZER_DIR, build_cached, models_home, progress_dir, record_matches  # noqa: F401 (re-exported)
from drake_bench.models.prompting import LETTERS, MC_INSTRUCTION, OPEN_INSTRUCTION
from drake_bench.models.tokenizer import DEFAULT_VOCAB_SIZE, IMAGE_TOKENS, make_processor, train_tokenizer
from drake_bench.models.zoo import build_tiny, model_info

RECIPE_VERSION = 8  # 2: public MC / yes-no items; 3: vision alignment; 4: cloze targets; 5: verify/count items;
# 6: shared pretrained vision tower, frozen in both stages; 7: Swin tower at 64 px with dense perception targets,
# public mix of generic primitives over one or several pictures; 8: half of each tower batch lone objects with shape
# weighted 3x (recipe 7's tower let its other targets crowd shape out), public mix generation 2 (generic questions
# about cracks, state marks and distortions, which recipe 7's language models were never asked)
RESERVED_IDS = 16


@dataclass(frozen=True)
class Recipe:
    """Everything that determines a pretrained tiny checkpoint (its hash names the cache)."""

    steps_multimodal: int = 1200
    steps_text: int = 300
    batch_multimodal: int = 8
    batch_text: int = 16
    n_multimodal: int = 6000
    n_text: int = 2400
    lr: float = 3e-3
    warmup: int = 15
    max_grad_norm: float = 1.0
    data_seed: int = 0
    vision_steps: int = 1000
    vision_batch: int = 64
    vision_items: int = 4000
    vision_lr: float = 2e-3
    tower_steps: int = 3000
    tower_batch: int = 64
    tower_lr: float = 2e-3
    probe_pictures: int = 2000
    tower_single_fraction: float = 0.5  # share of each tower batch drawn as single-object pictures
    tower_shape_weight: float = 3.0  # weight of the shape targets in the tower's loss
    mix: int = 2  # public-mix generation (drake_bench.benchmarks.synth.public.MIX_GENERATIONS)
    vocab_size: int = DEFAULT_VOCAB_SIZE
    version: int = RECIPE_VERSION

    def as_dict(self) -> dict[str, Any]:
        """The recipe's fields; the tower-curriculum and mix fields are left out where they equal what recipes
        from before those fields implied (no lone-object share, shape weight 1, mix generation 1), so those
        recipes keep their records, cache entries and manifests."""
        out = dataclasses.asdict(self)
        for key, default in (("tower_single_fraction", 0.0), ("tower_shape_weight", 1.0), ("mix", 1)):
            if out[key] == default:
                del out[key]
        return out


DEFAULT_RECIPE = Recipe()


# ---------------------------------------------------------------------- data (synth imported lazily)
def tokenizer_corpus(recipe: Recipe) -> list[str]:
    """Texts the shared tokenizer is trained on (synth corpus + prompt scaffolding)."""
    from drake_bench.benchmarks.synth.public import corpus_texts, public_mix, public_text_mix

    scaffold = ["USER: ASSISTANT:", MC_INSTRUCTION, OPEN_INSTRUCTION, "\n".join(f"{c}. " for c in LETTERS)]
    try:
        texts = list(corpus_texts())
    except Exception:  # a partially available synth registry: fall back to the public mixes
        texts = [t for s in public_mix(400) + public_text_mix(400) for t in (s.question, s.answer)]
    return scaffold + texts


def training_data(multimodal: bool, recipe: Recipe) -> list[Any]:
    """The public-mix items a tiny model is pretrained on."""
    from drake_bench.benchmarks.synth.public import public_mix, public_text_mix

    if multimodal:
        return public_mix(recipe.n_multimodal, recipe.data_seed, recipe.mix) + public_text_mix(
            recipe.n_multimodal // 4, recipe.data_seed
        )
    return public_text_mix(recipe.n_text, recipe.data_seed)


# ---------------------------------------------------------------------- cache entries
def ensure_tokenizer(recipe: Recipe | None = None) -> Path:
    """Directory of the shared tiny-zoo tokenizer (trained on first use)."""
    recipe = recipe or DEFAULT_RECIPE

    def build(tmp: Path) -> dict[str, Any]:
        # 16 ids of headroom: AutoTokenizer maps Qwen2 checkpoints to Qwen2Tokenizer, which adds
        # "<|endoftext|>" after the trained vocabulary; it must still fit the embedding matrix.
        train_tokenizer(tokenizer_corpus(recipe), recipe.vocab_size - RESERVED_IDS).save_pretrained(tmp)
        return {}

    return build_cached(
        models_home() / TOKENIZER_DIR, {"vocab_size": recipe.vocab_size, "version": recipe.version}, build
    )


def checkpoint_dir(name: str, seed: int = 0) -> Path:
    return models_home() / (name if seed == 0 else f"{name}-seed{seed}")


def _checkpoint_record(name: str, seed: int, recipe: Recipe) -> dict[str, Any]:
    """What a cached checkpoint must have been built from (compared with its ``drake_pretrain.json``)."""
    return {"name": name, "seed": seed, "recipe": recipe.as_dict()}


def is_pretrained(name: str, seed: int = 0, recipe: Recipe | None = None) -> bool:
    """Whether a tiny zoo model's checkpoint for ``recipe`` is already cached."""
    return record_matches(checkpoint_dir(name, seed), _checkpoint_record(name, seed, recipe or DEFAULT_RECIPE))


def ensure_pretrained(
    name: str, seed: int = 0, recipe: Recipe | None = None, progress: Callable[[str], None] | None = None
) -> Path:
    """Path of the pretrained checkpoint of a tiny zoo model, building it once if needed.

    The build resumes: the shared tower and the language-model stage keep snapshots next to the cache
    entry (:func:`~drake_bench.models.cache.progress_dir`), removed once the checkpoint is published.
    """
    recipe = recipe or DEFAULT_RECIPE
    entry = model_info(name)
    if not entry.tiny:
        raise DrakeBenchError(f"ensure_pretrained: {name!r} is not a tiny zoo model; load it with load_base")

    def build(tmp: Path) -> dict[str, Any]:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(ensure_tokenizer(recipe))
        processor = make_processor(tok) if entry.multimodal else tok
        model = build_tiny(name, seed=seed)
        if model.get_input_embeddings().num_embeddings < len(tok):
            raise DrakeBenchError(
                f"tokenizer has {len(tok)} ids but {name} has only "
                f"{model.get_input_embeddings().num_embeddings} embeddings"
            )
        t0 = time.perf_counter()
        if entry.multimodal:
            from drake_bench.models.vision import ensure_vision_tower, install_tower

            install_tower(model, ensure_vision_tower(recipe, progress=progress))
        vision_losses = align_vision(model, processor, recipe, seed=seed) if entry.multimodal else []
        losses = pretrain(
            model,
            processor,
            training_data(bool(entry.multimodal), recipe),
            recipe,
            multimodal=bool(entry.multimodal),
            seed=seed,
            resume_dir=progress_dir(final, record),
            progress=(lambda line: progress(f"{name}: {line}")) if progress else None,
        )
        seconds = round(time.perf_counter() - t0, 2)
        model.save_pretrained(tmp)
        processor.save_pretrained(tmp)
        return {"train_seconds": seconds, "vision_losses": vision_losses, "losses": losses}

    final, record = checkpoint_dir(name, seed), _checkpoint_record(name, seed, recipe)
    return build_cached(final, record, build)


# ---------------------------------------------------------------------- training loop
def _approx_len(sample: Any) -> int:
    return IMAGE_TOKENS * len(sample.images) + (len(sample.question) + len(sample.answer)) // 3


def batches(samples: Sequence[Any], batch_size: int, steps: int, seed: int) -> Iterator[list[Any]]:
    """``steps`` batches: seeded shuffles (one per epoch), length-sorted inside windows of 8 batches."""
    gen = torch.Generator().manual_seed(seed)
    order: list[int] = []
    window = 8 * batch_size
    made = 0
    while made < steps:
        perm = torch.randperm(len(samples), generator=gen).tolist()
        for w in range(0, len(perm), window):
            chunk = sorted(perm[w : w + window], key=lambda i: (_approx_len(samples[i]), i))
            groups = [chunk[j : j + batch_size] for j in range(0, len(chunk), batch_size)]
            for g in torch.randperm(len(groups), generator=gen).tolist():  # batches in random order
                order += groups[g]
        while len(order) >= batch_size and made < steps:
            yield [samples[i] for i in order[:batch_size]]
            order = order[batch_size:]
            made += 1


def pretrain(
    model: Any,
    processor: Any,
    samples: Sequence[Any],
    recipe: Recipe,
    *,
    multimodal: bool,
    seed: int = 0,
    steps: int | None = None,
    resume_dir: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[float]:
    """Train every parameter of ``model`` on ``samples`` (see module docstring); returns the loss curve.

    With ``resume_dir`` a snapshot is kept every 200 steps; an interrupted run continues from it to
    bit-identical weights (the batch order is drawn from its own generator and skipped up to the snapshot).
    """
    from drake_bench.models.resume import load_progress, save_progress
    from drake_bench.models.vision import warmup_cosine

    if not samples:
        raise DrakeBenchError("pretrain: no training samples")
    steps = steps if steps is not None else (recipe.steps_multimodal if multimodal else recipe.steps_text)
    batch = recipe.batch_multimodal if multimodal else recipe.batch_text
    model.requires_grad_(True)
    if multimodal:  # LLaVA-1.5 keeps its CLIP tower frozen in both stages
        model.model.vision_tower.requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=recipe.lr, betas=(0.9, 0.98), weight_decay=0.0)
    warm = max(1, min(recipe.warmup, steps // 4))
    start, extra = load_progress(resume_dir, {"model": model}, opt) if resume_dir else (0, {})
    losses: list[float] = list(extra.get("losses", []))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # identical float summation order on every machine thread count
    t0 = time.perf_counter()
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            for step, b in enumerate(batches(samples, batch, steps, seed + 7919 * recipe.data_seed)):
                if step < start:
                    continue
                for group in opt.param_groups:
                    group["lr"] = recipe.lr * warmup_cosine(step, steps, warm)
                # padded, as when the shipped weights were built: their recipe reproduces them byte for byte
                losses.append(
                    round(
                        engine.train_step(model, processor, b, opt, max_grad_norm=recipe.max_grad_norm, packed=False), 5
                    )
                )
                done = step + 1
                if resume_dir and done % 200 == 0 and done < steps:
                    save_progress(resume_dir, done, {"model": model}, opt, {"losses": losses})
                if progress and (done % 100 == 0 or done == steps):
                    progress(f"step {done}/{steps}, loss {losses[-1]:.3f}, {time.perf_counter() - t0:.0f} s")
    finally:
        torch.set_num_threads(threads)
    model.eval()
    model.requires_grad_(False)
    return losses


def align_vision(model: Any, processor: Any, recipe: Recipe, seed: int = 0) -> list[float]:
    """Stage 1: align the projector to the frozen shared tower; returns the loss curve.

    As in LLaVA-1.5's first stage, only the projector trains. It reads exactly what the language model
    reads (the tower's tokens, :func:`~drake_bench.models.vision.tower_tokens`), and its projected
    tokens must keep what the tower perceives: per token, the attributes of the object in its cell, per
    image (mean token) the count, domain, distortion and text, through linear heads that are discarded
    afterwards (:class:`~drake_bench.models.vision.PerceptionHeads`, on ``vision_items`` perception
    pictures). Same seed, same weights (single-threaded CPU math).
    """
    from drake_bench.benchmarks.synth.public import perception_pictures
    from drake_bench.models.vision import PerceptionHeads, frozen_tokens, targets

    if recipe.vision_steps <= 0:
        return []
    pictures = perception_pictures(0, recipe.vision_items, recipe.data_seed + 2)
    tower, projector = model.model.vision_tower, model.model.multi_modal_projector
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    losses: list[float] = []
    try:
        # the tower is frozen: its features are computed once
        feats = frozen_tokens(tower, processor.image_processor, [p.image for p in pictures])
        token_y, image_y, presence_y = targets(pictures)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed + 104729)
            heads = PerceptionHeads(model.config.text_config.hidden_size)
            projector.requires_grad_(True)
            opt = torch.optim.AdamW(
                [*projector.parameters(), *heads.parameters()], lr=recipe.vision_lr, weight_decay=0.0
            )
            gen = torch.Generator().manual_seed(seed + 7919 * recipe.data_seed)
            for _ in range(recipe.vision_steps):
                idx = torch.randint(0, len(pictures), (recipe.vision_batch,), generator=gen)
                loss = heads.loss(projector(feats[idx]), token_y[idx], image_y[idx], presence_y[idx])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                losses.append(round(float(loss.detach()), 5))
    finally:
        torch.set_num_threads(threads)
    return losses


# ---------------------------------------------------------------------- knowledge check
def token_f1(pred: str, ref: str) -> float:
    """Bag-of-words F1 (SQuAD style), the knowledge metric reported for the public mix."""
    p, r = (
        pred.lower().replace(";", " ").replace(",", " ").split(),
        ref.lower().replace(";", " ").replace(",", " ").split(),
    )
    if not p or not r:
        return float(p == r)
    common = sum(min(p.count(w), r.count(w)) for w in set(p))
    if common == 0:
        return 0.0
    prec, rec = common / len(p), common / len(r)
    return 2 * prec * rec / (prec + rec)


def public_eval(model: Any, processor: Any, samples: Sequence[Any], max_new_tokens: int = 32) -> float:
    """Mean token-F1 of greedy answers on held-out public items."""
    preds = engine.generate(model, processor, samples, max_new_tokens=max_new_tokens)
    return sum(token_f1(p, s.answer) for p, s in zip(preds, samples)) / max(1, len(samples))
