"""Training and inference core shared by the evaluator and every method.

One place decides how an item becomes tensors, so a method's training and the
evaluator's scoring can never disagree on prompts, padding or decoding:

* :func:`train_step` — one optimiser step on a batch (images of all items are
  concatenated in prompt order, so multi-image items just work); loss on answer
  tokens only (see :mod:`drake_bench.models.prompting` for the target format). The
  batch's items are packed into one sequence, each with its own positions and a
  block-diagonal causal mask, so no compute goes to padding (items carry 1 to 5
  images of 36 tokens each: right padding filled a third of the token slots at batch 4);
  the loss and gradients are the padded step's within float tolerance.
* :func:`generate` — batched greedy decoding with fixed settings (no sampling,
  one beam, left padding), returns only the newly generated text, stripped.
* :func:`choose` — multiple-choice scoring in cloze form: the option whose text is most
  likely as the answer (each prompt runs once; options continue from its KV cache); returns
  the option text.
* :func:`predict` — :func:`choose` for multiple-choice / yes-no items, :func:`generate`
  for open (16 new tokens) and free-text (64 new tokens) items, in input order.

Device-agnostic: tensors go to ``model.device``; bf16 autocast is used only on CUDA
(where the model is in float32 and the GPU supports bf16). Text-only models (a
tokenizer instead of a processor) take the same calls with image-free items.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from drake_bench.benchmarks.sample import AnswerType
from drake_bench.errors import DrakeBenchError
from drake_bench.models.kernels import SEGMENT_ATTENTION, packed_forward, transformers_model, use_segment_attention
from drake_bench.models.prompting import build_prompt, candidate_targets, is_choice, options, target

IGNORE_INDEX = -100
OPEN_MAX_NEW_TOKENS = 16
FREE_TEXT_MAX_NEW_TOKENS = 64
EVAL_BATCH_SIZE = 16  # predict(): generation batches; choice items are scored in batches of 2x this


def tokenizer_of(processor: Any) -> Any:
    """The tokenizer inside a processor (or the tokenizer itself for text models)."""
    return getattr(processor, "tokenizer", processor)


def _pad_id(tok: Any) -> int:
    return tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id


def _sid(sample: Any) -> str:
    return str(getattr(sample, "uid", None) or sample.__dict__.get("id", "?"))


def autocast(model: Any) -> contextlib.AbstractContextManager:
    """bf16 autocast on CUDA for float32 models; a no-op elsewhere."""
    dev = model.device
    if dev.type == "cuda" and torch.cuda.is_bf16_supported() and model.dtype == torch.float32:
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _encode_prompt(processor: Any, sample: Any) -> tuple[list[int], torch.Tensor | None]:
    """Token ids of the prompt (image tokens expanded) and the item's pixel values."""
    prompt = build_prompt(sample)
    if sample.images:
        if not hasattr(processor, "image_processor"):
            raise DrakeBenchError(
                f"sample {_sid(sample)!r} has {len(sample.images)} image(s) but the model is text-only "
                "(it has a tokenizer, not a multimodal processor)"
            )
        imgs = [im.convert("RGB") for im in sample.images]
        out = processor(text=prompt, images=imgs, return_tensors="pt")
        return out["input_ids"][0].tolist(), out["pixel_values"]
    tok = tokenizer_of(processor)
    return tok(prompt)["input_ids"], None


def _target_ids(tok: Any, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]


def _collate(
    seqs: Sequence[list[int]],
    labels: Sequence[list[int]] | None,
    pixels: Sequence[torch.Tensor | None],
    pad_id: int,
    left: bool,
    device: torch.device,
    dtype: torch.dtype,
) -> dict[str, torch.Tensor]:
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    lab = torch.full((len(seqs), width), IGNORE_INDEX, dtype=torch.long) if labels is not None else None
    for i, s in enumerate(seqs):
        sl = slice(width - len(s), width) if left else slice(0, len(s))
        ids[i, sl] = torch.tensor(s)
        mask[i, sl] = 1
        if lab is not None:
            lab[i, sl] = torch.tensor(labels[i])  # type: ignore[index]
    batch: dict[str, torch.Tensor] = {"input_ids": ids.to(device), "attention_mask": mask.to(device)}
    if lab is not None:
        batch["labels"] = lab.to(device)
    pv = [p for p in pixels if p is not None]
    if pv:
        batch["pixel_values"] = torch.cat(pv).to(device=device, dtype=dtype)
    return batch


def _float_dtype(model: Any) -> torch.dtype:
    return model.dtype if model.dtype.is_floating_point else torch.float32


def encode_for_training(model: Any, processor: Any, batch: Sequence[Any]) -> dict[str, torch.Tensor]:
    """Right-padded inputs with labels masked to the answer tokens (+ eos)."""
    tok = tokenizer_of(processor)
    seqs, labels, pixels = [], [], []
    for s in batch:
        p_ids, pv = _encode_prompt(processor, s)
        t_ids = _target_ids(tok, target(s))
        seqs.append(p_ids + t_ids)
        labels.append([IGNORE_INDEX] * len(p_ids) + t_ids)
        pixels.append(pv)
    return _collate(seqs, labels, pixels, _pad_id(tok), False, model.device, _float_dtype(model))


PACKABLE_MODEL_TYPES = frozenset({"llama", "qwen2", "qwen3", "mistral", "gemma", "gemma2", "phi3"})
"""Language models whose attention builds its mask through transformers' ``masking_utils``, which reads packed
sequences from ``position_ids`` (restarting at 0 for each item, no attention mask, no cache) and keeps each item's
attention to itself. Another architecture would let a packed item attend to the one before it, so it trains padded."""


def packs(model: Any) -> bool:
    """Whether :func:`loss_on` can pack this model's batches (see :data:`PACKABLE_MODEL_TYPES`)."""
    try:
        from transformers.masking_utils import find_packed_sequence_indices  # noqa: F401  (transformers >= 4.53)
    except ImportError:
        return False
    config = getattr(model, "config", None)
    text = getattr(config, "text_config", None) or config
    return getattr(text, "model_type", None) in PACKABLE_MODEL_TYPES and getattr(
        text, "_attn_implementation", "sdpa"
    ) in ("sdpa", "eager", "flash_attention_2", "flash_attention_3", "flex_attention", SEGMENT_ATTENTION)


def encode_packed(model: Any, processor: Any, batch: Sequence[Any]) -> dict[str, torch.Tensor]:
    """The batch as one sequence (a batch of 1): the items' prompt + answer ids one after another, ``position_ids``
    restarting at 0 for each item, labels masked to the answer tokens (+ eos), every item's pixels in order. Each
    item's first label is a prompt token (ignored), so no item's last position is scored on the next item."""
    return _encode_packed(model, processor, batch)[0]


def _encode_packed(model: Any, processor: Any, batch: Sequence[Any]) -> tuple[dict[str, torch.Tensor], list[int]]:
    tok = tokenizer_of(processor)
    ids: list[int] = []
    labels: list[int] = []
    positions: list[int] = []
    counts: list[int] = []
    pixels = []
    for s in batch:
        p_ids, pv = _encode_prompt(processor, s)
        t_ids = _target_ids(tok, target(s))
        ids += p_ids + t_ids
        labels += [IGNORE_INDEX] * len(p_ids) + t_ids
        positions += range(len(p_ids) + len(t_ids))
        counts.append(len(t_ids))
        if pv is not None:
            pixels.append(pv)
    dev = model.device
    out = {
        "input_ids": torch.tensor([ids], device=dev),
        "position_ids": torch.tensor([positions], device=dev),
        "labels": torch.tensor([labels], device=dev),
    }
    if pixels:
        out["pixel_values"] = torch.cat(pixels).to(device=dev, dtype=_float_dtype(model))
    return out, counts


def packing(packed_training: bool) -> bool | None:
    """The ``packed`` argument of :func:`loss_on` / :func:`answer_logits` for an entry's ``packed_training`` setting:
    True packs wherever the architecture allows (``None``), False trains padded."""
    return None if packed_training else False


def use_segment_attention_if_packable(model: Any) -> None:
    """Switch ``model``'s language model to segment attention (:mod:`drake_bench.models.kernels`) where its packed
    training steps go through it (:func:`packs`); any other model keeps its attention."""
    if packs(model):
        use_segment_attention(model)


def _use_packing(model: Any, packed: bool | None) -> bool:
    if packed is False:
        return False
    if packs(model):
        return True
    if packed:
        raise DrakeBenchError(
            f"packed training is not supported for model type "
            f"{getattr(getattr(model, 'config', None), 'model_type', '?')!r} (see "
            "PACKABLE_MODEL_TYPES); packed=None trains it padded"
        )
    return False


def answer_logits(
    model: Any, processor: Any, items: Sequence[Any], packed: bool | None = None
) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """The logits predicting every answer token (+ eos) of ``items`` (tokens x vocabulary, float32, item after item),
    those tokens, and how many each item has: the positions :func:`loss_on` scores, with gradients when enabled. For
    methods whose loss reads the logits themselves (distillation). ``packed``: as in :func:`loss_on`."""
    if _use_packing(model, packed):
        inputs, counts = _encode_packed(model, processor, items)
        labels = inputs.pop("labels")[0, 1:]
        scored = (labels != IGNORE_INDEX).nonzero()[:, 0]  # positions whose next token is an answer token
        with autocast(model), packed_forward():
            logits = model(**inputs, use_cache=False, logits_to_keep=scored).logits  # no cache: packing reads positions
        return logits[0].float(), labels[scored], counts
    inputs = encode_for_training(model, processor, list(items))
    labels = inputs.pop("labels")
    targets = labels[:, 1:]
    valid = (targets != IGNORE_INDEX).any(0).nonzero()
    first = int(valid[0]) if len(valid) else targets.shape[1] - 1
    with autocast(model):
        logits = model(**inputs, logits_to_keep=labels.shape[1] - first).logits
    targets = targets[:, first:]
    logits = logits[:, : targets.shape[1]].float()
    mask = targets != IGNORE_INDEX
    return logits[mask], targets[mask], [int(n) for n in mask.sum(1)]


def loss_on(model: Any, processor: Any, batch: Sequence[Any], packed: bool | None = None) -> torch.Tensor:
    """Mean token loss over the batch's answer tokens (with grad; for methods that add terms).

    ``packed`` (default: wherever :func:`packs` allows) runs the items as one packed sequence and applies the LM
    head to the answer positions only; ``False`` runs them right-padded (the path every run took before packing;
    pretraining keeps it, so the shipped weights' recipe reproduces them byte for byte)."""
    if not batch:
        raise DrakeBenchError("loss_on/train_step got an empty batch")
    if _use_packing(model, packed):
        logits, targets, _ = answer_logits(model, processor, batch, packed=True)
        return torch.nn.functional.cross_entropy(logits, targets, reduction="sum") / max(targets.numel(), 1)
    inputs = encode_for_training(model, processor, batch)  # padded: these exact ops, so earlier results rerun
    labels = inputs.pop("labels")
    first, keep = _kept_positions(labels)
    with autocast(model):
        logits = model(**inputs, logits_to_keep=keep).logits
    return _token_nll(logits, labels[:, first + 1 :]).sum() / (labels[:, 1:] != IGNORE_INDEX).sum().clamp(min=1)


def _kept_positions(labels: torch.Tensor) -> tuple[int, int]:
    """First position whose logits are needed and how many positions to keep.

    Only positions predicting a labelled token need the LM head; prompts (and their
    36 tokens per image) do not, so skipping them saves most of the head's cost.
    """
    width = labels.shape[1]
    valid = (labels[:, 1:] != IGNORE_INDEX).any(0).nonzero()
    first = int(valid[0]) if len(valid) else width - 1
    return first, width - first


def _token_nll(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per-token negative log-likelihood; logits[:, i] predicts targets[:, i]; ignored tokens get 0."""
    logits = logits[:, : targets.shape[1]].float()
    nll = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=IGNORE_INDEX, reduction="none"
    )
    return nll.view(targets.shape)


def train_step(
    model: Any,
    processor: Any,
    batch: Sequence[Any],
    optimizer: torch.optim.Optimizer,
    max_grad_norm: float | None = None,
    packed: bool | None = None,
) -> float:
    """One optimiser step on ``batch``; returns the loss. Leaves the model in train mode. ``packed``: see
    :func:`loss_on`."""
    model.train()
    loss = loss_on(model, processor, batch, packed=packed)
    loss.backward()
    if max_grad_norm is not None:
        params = [p for g in optimizer.param_groups for p in g["params"]]
        torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return float(loss.detach())


def _flag_only(module: Any) -> bool:
    """Whether ``module.train(mode)`` does nothing but set ``training`` on it and its children: true of
    ``torch.nn.Module.train`` itself, and of transformers' override when its model loads no hub kernels (the
    override only re-casts kernels then)."""
    train = type(module).train
    if train is torch.nn.Module.train:
        return True
    from transformers import PreTrainedModel

    return train is PreTrainedModel.train and not getattr(module, "use_kernels", False)


def set_training(model: Any, mode: bool) -> None:
    """``model.train(mode)``, at a fraction of its cost where it only sets flags.

    ``Module.train`` recurses through every child and sets ``training`` through ``Module.__setattr__``; on a tiny
    model with LoRA on every linear (about 400 modules) that costs as much as a short generation, and prediction
    switches to eval mode and back on every call (the evaluator makes one call per client, owner and task). Where
    every module's ``train`` is a plain flag setter (:func:`_flag_only`) this writes the same flags directly; any
    other module (a layer whose ``train`` does more, such as DoRA's) sends the whole model through
    ``model.train(mode)``. The flags end up the same either way (tests/test_engine.py checks it).
    """
    modules = list(model.modules())
    if not all(_flag_only(m) for m in modules):
        model.train(mode)
        return
    for m in modules:
        m.__dict__["training"] = mode  # what Module.__setattr__ does for a plain attribute


@contextlib.contextmanager
def _eval_mode(model: Any) -> Iterator[None]:
    was = model.training
    set_training(model, False)
    try:
        with torch.inference_mode():
            yield
    finally:
        set_training(model, was)


def _chunks(seq: Sequence[Any], n: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(seq), n):
        yield seq[i : i + n]


def generate(
    model: Any, processor: Any, samples: Sequence[Any], max_new_tokens: int = OPEN_MAX_NEW_TOKENS, batch_size: int = 16
) -> list[str]:
    """Greedy answers (fixed settings: no sampling, 1 beam, left padding), one per item."""
    tok = tokenizer_of(processor)
    out: list[str] = []
    with _eval_mode(model):
        for chunk in _chunks(list(samples), batch_size):
            enc = [_encode_prompt(processor, s) for s in chunk]
            inputs = _collate(
                [e[0] for e in enc], None, [e[1] for e in enc], _pad_id(tok), True, model.device, _float_dtype(model)
            )
            with autocast(model):
                gen = model.generate(
                    **inputs,
                    max_new_tokens=max_new_tokens,
                    do_sample=False,
                    num_beams=1,
                    temperature=None,
                    top_p=None,
                    top_k=None,
                    pad_token_id=_pad_id(tok),
                    eos_token_id=tok.eos_token_id,
                )
            new = gen[:, inputs["input_ids"].shape[1] :]
            out += [t.strip() for t in tok.batch_decode(new, skip_special_tokens=True)]
    return out


def score_targets(model: Any, processor: Any, pairs: Sequence[tuple[Any, str]], batch_size: int = 32) -> list[float]:
    """Summed log-likelihood of each (item, target text + eos) pair given the item's prompt."""
    tok = tokenizer_of(processor)
    scores: list[float] = []
    prompt_cache: dict[int, tuple[list[int], torch.Tensor | None]] = {}
    with _eval_mode(model):
        for chunk in _chunks(list(pairs), batch_size):
            seqs, labels, pixels = [], [], []
            for s, t in chunk:
                if id(s) not in prompt_cache:
                    prompt_cache[id(s)] = _encode_prompt(processor, s)
                p_ids, pv = prompt_cache[id(s)]
                t_ids = _target_ids(tok, t)
                seqs.append(p_ids + t_ids)
                labels.append([IGNORE_INDEX] * len(p_ids) + t_ids)
                pixels.append(pv)
            inputs = _collate(seqs, labels, pixels, _pad_id(tok), False, model.device, _float_dtype(model))
            lab = inputs.pop("labels")
            first, keep = _kept_positions(lab)
            with autocast(model):
                logits = model(**inputs, logits_to_keep=keep).logits
            scores += (-_token_nll(logits, lab[:, first + 1 :]).sum(-1)).tolist()
    return scores


def _candidate_ids(tok: Any, samples: Sequence[Any]) -> list[list[list[int]]]:
    """Per item, the token ids of each candidate target (" yes", " red", " 3", ...), without eos."""
    cache: dict[str, list[int]] = {}
    out = []
    for s in samples:
        ids = []
        for c in candidate_targets(s):
            if c not in cache:
                cache[c] = tok(c, add_special_tokens=False)["input_ids"]
            ids.append(cache[c])
        out.append(ids)
    return out


def choice_scores(model: Any, processor: Any, samples: Sequence[Any], batch_size: int = 32) -> list[list[float]]:
    """Each choice item's score for each of its candidate targets; :func:`choose` takes the best.

    The rule is the item's own, never its call's, so an item scores the same however queries are grouped:

    * every candidate one token (" yes", " B", " red"): log p(candidate token | prompt) at the answer position;
    * otherwise: the candidate's summed log-likelihood, target tokens and eos.

    Each prompt (its images included) runs once: the batch of prompts, right-padded, fills the model's KV cache,
    whose last real position gives every candidate's first token; multi-token candidates then continue from a
    copy of their item's cache (one row per candidate, positions resuming after the item's own prompt). This
    gives the scores of running each prompt + candidate in full, within float tolerance, at the cost of one
    prompt pass instead of one per option (tests/test_engine.py checks both).
    """
    samples = list(samples)
    tok = tokenizer_of(processor)
    cand_ids = _candidate_ids(tok, samples)
    out: list[list[float]] = []
    with _eval_mode(model):
        for start in range(0, len(samples), batch_size):
            chunk = samples[start : start + batch_size]
            out += _score_chunk(model, processor, chunk, cand_ids[start : start + batch_size])
    return out


def _score_chunk(
    model: Any, processor: Any, chunk: Sequence[Any], cand_ids: Sequence[list[list[int]]]
) -> list[list[float]]:
    tok = tokenizer_of(processor)
    enc = [_encode_prompt(processor, s) for s in chunk]
    lengths = torch.tensor([len(e[0]) for e in enc])
    inputs = _collate(
        [e[0] for e in enc], None, [e[1] for e in enc], _pad_id(tok), False, model.device, _float_dtype(model)
    )
    single = [all(len(c) == 1 for c in cands) for cands in cand_ids]
    need_rest = not all(single)
    with autocast(model):
        first = model(**inputs, use_cache=need_rest, logits_to_keep=(lengths - 1).unsqueeze(-1).to(model.device))
    logp_first = torch.log_softmax(first.logits.reshape(len(chunk), -1).float(), dim=-1)
    scores: list[list[float]] = []
    rows: list[tuple[int, list[int]]] = []  # (item, candidate target + eos) continued from the cache
    for i, cands in enumerate(cand_ids):
        if single[i]:
            scores.append([float(logp_first[i, c[0]]) for c in cands])
        else:
            scores.append([float(logp_first[i, c[0]]) if c else 0.0 for c in cands])
            rows += [(i, c + [tok.eos_token_id]) for c in cands]
    if rows:
        rest = _continue_from_prefix(
            model, _returned_cache(first), inputs["attention_mask"], lengths, rows, _pad_id(tok)
        )
        k = 0
        for i, cands in enumerate(cand_ids):
            if not single[i]:
                for j, c in enumerate(cands):
                    if not c:  # an empty target: its only token is eos, predicted at the answer position
                        scores[i][j] = float(logp_first[i, tok.eos_token_id])
                    else:
                        scores[i][j] += rest[k]
                    k += 1
    return scores


@functools.cache
def _cache_keyword(model_class: type) -> str:
    """The keyword ``model_class.forward`` takes a key/value cache by: ``cache`` in recent transformers, where
    ``past_key_values`` is a deprecated alias due to be removed (a removed keyword would be swallowed by
    ``**kwargs`` and the prompt silently dropped), ``past_key_values`` in the releases before it."""
    params = inspect.signature(model_class.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _returned_cache(output: Any) -> Any:
    """The key/value cache a forward with ``use_cache=True`` returned, under either of its names (a
    ``ModelOutput`` holds only the fields that are set)."""
    cache = output.get("cache")
    return cache if cache is not None else output.past_key_values


def _continue_from_prefix(
    model: Any,
    cache: Any,
    prompt_mask: torch.Tensor,
    lengths: torch.Tensor,
    rows: Sequence[tuple[int, list[int]]],
    pad_id: int,
) -> list[float]:
    """Summed log-likelihood of tokens 2.. of each row's target, its item's prompt read from ``cache``.

    Row r feeds target tokens 1..n-1 after a copy of item i's cached prompt: position L_i + k (the item's own
    length, not the padded one), the padding between its prompt and the batch's widest one masked out."""
    dev = model.device
    width = max(len(t) for _, t in rows) - 1
    if width == 0:
        return [0.0] * len(rows)
    item = torch.tensor([i for i, _ in rows], device=dev)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    targets = torch.full((len(rows), width), IGNORE_INDEX, dtype=torch.long)
    for r, (_, t) in enumerate(rows):
        ids[r, : len(t) - 1] = torch.tensor(t[:-1])
        mask[r, : len(t) - 1] = 1
        targets[r, : len(t) - 1] = torch.tensor(t[1:])
    cache.reorder_cache(item)  # one copy of the item's prompt cache per row
    positions = lengths.to(dev)[item].unsqueeze(-1) + torch.arange(width, device=dev)
    with autocast(model):
        logits = model(
            input_ids=ids.to(dev),
            attention_mask=torch.cat([prompt_mask[item], mask.to(dev)], dim=1),
            position_ids=positions,
            use_cache=False,
            **{_cache_keyword(type(transformers_model(model))): cache},
        ).logits
    return (-_token_nll(logits, targets.to(dev)).sum(-1)).tolist()


def choose(model: Any, processor: Any, samples: Sequence[Any], batch_size: int = 32) -> list[str]:
    """Multiple-choice answers by the log-likelihood of each option's text (:func:`choice_scores`); returns the
    option text. Ties go to the earlier option."""
    samples = list(samples)
    out = []
    for s, sc in zip(samples, choice_scores(model, processor, samples, batch_size)):
        out.append(options(s)[max(range(len(sc)), key=lambda i: (sc[i], -i))])
    return out


def predict(
    model: Any,
    processor: Any,
    samples: Sequence[Any],
    max_new_tokens: int = OPEN_MAX_NEW_TOKENS,
    free_text_max_new_tokens: int = FREE_TEXT_MAX_NEW_TOKENS,
    batch_size: int = EVAL_BATCH_SIZE,
) -> list[str]:
    """Answers in input order: choice items scored, open/free-text items generated."""
    samples = list(samples)
    out: list[str | None] = [None] * len(samples)
    groups: dict[str, list[int]] = {"choice": [], "open": [], "free": []}
    for i, s in enumerate(samples):
        if is_choice(s):
            groups["choice"].append(i)
        elif AnswerType(s.answer_type) == AnswerType.FREE_TEXT:
            groups["free"].append(i)
        else:
            groups["open"].append(i)
    if groups["choice"]:
        res = choose(model, processor, [samples[i] for i in groups["choice"]], batch_size=2 * batch_size)
        for i, r in zip(groups["choice"], res):
            out[i] = r
    for key, n in (("open", max_new_tokens), ("free", free_text_max_new_tokens)):
        if groups[key]:
            res = generate(model, processor, [samples[i] for i in groups[key]], n, batch_size)
            for i, r in zip(groups[key], res):
                out[i] = r
    return [o if o is not None else "" for o in out]
