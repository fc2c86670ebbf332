"""The model judge: a causal language model that rates free-text answers (drake_bench.evaluation.judge says
how ratings become scores and when the evaluator asks a judge)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Sequence

from drake_bench.evaluation.judge import JUDGE_PROMPT, JUDGE_PROMPT_SHA, JudgeQuery, parse_rating


class ModelJudge:
    """A causal language model as judge: :data:`JUDGE_PROMPT` (inside the tokenizer's chat template when it has
    one), greedy decoding, the rating parsed with :func:`parse_rating`.

    ``model`` is anything :func:`drake_bench.models.load_base` loads (a tiny zoo name, a short real name, a Hub id
    or a local path; from the Hugging Face cache when ``HF_HUB_OFFLINE=1``). Judges of the papers' size
    (GPT-4-class) do not run on a laptop; an open instruction-tuned model on a GPU is the realistic choice."""

    def __init__(self, model: str, *, max_new_tokens: int = 256, batch_size: int = 8, device: str = "cpu") -> None:
        from drake_bench.models.identity import model_identity
        from drake_bench.models.loading import load_base

        self.model_name = model
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size
        self.model, processor = load_base(model, device=device)
        self.tokenizer = getattr(processor, "tokenizer", processor)
        weights = model_identity(model)
        commit = getattr(self.model.config, "_commit_hash", None)  # the Hub revision it came from, when it did
        if commit:
            weights = {**weights, "commit": commit}
        if Path(model).is_dir():  # a local folder's name pins nothing: its weight files do
            weights = {
                **weights,
                "safetensors_sha256": {
                    f.name: hashlib.sha256(f.read_bytes()).hexdigest()
                    for f in sorted(Path(model).glob("*.safetensors"))
                },
            }
        self.identity = json.dumps(
            {
                "model": model,
                "weights": weights,
                "prompt_sha256": JUDGE_PROMPT_SHA,
                "decoding": {"do_sample": False, "max_new_tokens": max_new_tokens},
            },
            sort_keys=True,
            separators=(",", ":"),
        )

    def prompt(self, query: JudgeQuery) -> str:
        text = JUDGE_PROMPT.format(question=query.question, answer=query.answer, reference=query.reference)
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template(
                [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
            )
        return text

    def judgements(self, queries: Sequence[JudgeQuery]) -> list[str]:
        """The judge's whole replies (explanation and rating), for inspection."""
        import torch

        tok = self.tokenizer
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        out: list[str] = []
        for start in range(0, len(queries), self.batch_size):
            chunk = [self.prompt(q) for q in queries[start : start + self.batch_size]]
            ids = [tok(p, add_special_tokens=not getattr(tok, "chat_template", None))["input_ids"] for p in chunk]
            width = max(len(i) for i in ids)  # left padding: every reply starts at the same position
            input_ids = torch.tensor([[pad] * (width - len(i)) + i for i in ids], device=self.model.device)
            mask = torch.tensor([[0] * (width - len(i)) + [1] * len(i) for i in ids], device=self.model.device)
            with torch.no_grad():
                gen = self.model.generate(
                    input_ids=input_ids,
                    attention_mask=mask,
                    do_sample=False,
                    num_beams=1,
                    max_new_tokens=self.max_new_tokens,
                    temperature=None,
                    top_p=None,
                    top_k=None,
                    pad_token_id=pad,
                    eos_token_id=tok.eos_token_id,
                )
            out += tok.batch_decode(gen[:, width:], skip_special_tokens=True)
        return out

    def rate(self, queries: Sequence[JudgeQuery]) -> list[float | None]:
        return [parse_rating(j) for j in self.judgements(queries)]
