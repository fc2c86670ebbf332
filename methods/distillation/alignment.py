"""FedMKT's token alignment: top-k logits of one tokenizer moved onto another's answer tokens.

FedMKT (Fan et al., COLING 2025) lets models with different tokenizers teach each other; its public code
(FATE-LLM ``fedmkt/token_alignment``, adapted from FuseLLM) aligns a sender's per-position top-k logits with the
receiver's tokens in two steps:

1. **Sequence alignment.** The two tokenizations of the same text are aligned by dynamic time warping whose cost is
   the edit distance between token strings (the code's default ``token_align_strategy="dtw"``).
2. **Vocabulary mapping.** Every sender token maps to the receiver token of the same string (word-start marks
   translated), else to the receiver token at the least edit distance (FuseLLM's ``find_best_mapping``). A receiver
   position matched to exactly one sender position whose token is its own (the same string, or mapped to it) takes
   that position's top-k entries, each mapped; an entry whose receiver token is already taken is dropped (the first,
   most likely, wins). Any other receiver position (matched to several sender tokens, or to a different token) gets
   a one-hot distribution on its own token.

Adaptations ([I] inferred; the reasons are in docs/methods/distillation-baselines.md):

* [I] Positions are the *answer* tokens (the target text and eos) whose logits the methods exchange, and the one-hot
  falls on the receiver token that position predicts. FuseLLM aligns whole input sequences and puts the one-hot on
  the aligned input token; our rows are indexed by the token they predict, so that token is the counterpart.
* [I] Special tokens map by role (eos to eos, bos to bos, pad to pad, unk to unk), not by string distance: the eos
  that ends every answer is ``</s>`` in one tokenizer and ``<|endoftext|>`` in another.
* Rows keep the sender's width k: dropped or missing entries are padded with the row's first index at a logit of
  ``PAD_LOGIT`` (a softmax weight of 0), so every aligned tensor is rectangular and finite (a Message allows no inf).

When both tokenizers have the same vocabulary and tokenize the text identically, alignment is the identity (the
tiny zoo's families share one tokenizer; tests/test_distillation_baselines.py covers both paths).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import torch

PAD_LOGIT = -1.0e4
"""The logit of padding entries: exp(-1e4) underflows to exactly 0 beside any real logit."""

_WORD_MARKS = ("Ġ", "▁")  # byte-level BPE's and sentencepiece's "a space before this token"


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance between two token strings (insertions, deletions and substitutions cost 1)."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def dtw(sender: Sequence[str], receiver: Sequence[str]) -> list[list[int]]:
    """Dynamic time warping of two token sequences under edit distance; for every receiver position, the sender
    positions aligned with it (FuseLLM's ``dtw``, returned from the receiver's side)."""
    n, m = len(sender), len(receiver)
    cost = np.full((n + 1, m + 1), np.inf)
    cost[0, 0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            d = edit_distance(_bare(sender[i - 1]), _bare(receiver[j - 1]))
            cost[i, j] = d + min(cost[i - 1, j], cost[i, j - 1], cost[i - 1, j - 1])
    matched: list[list[int]] = [[] for _ in range(m)]
    i, j = n, m
    while i > 0 and j > 0:
        matched[j - 1].append(i - 1)
        step = int(np.argmin([cost[i - 1, j - 1], cost[i - 1, j], cost[i, j - 1]]))
        if step == 0:
            i, j = i - 1, j - 1
        elif step == 1:
            i -= 1
        else:
            j -= 1
    return [sorted(set(js)) for js in matched]


def _bare(token: str) -> str:
    for mark in _WORD_MARKS:
        token = token.replace(mark, "")
    return token


def _mark(vocab: dict[str, int]) -> str:
    """The word-start mark a vocabulary uses ('' when it uses neither)."""
    for mark in _WORD_MARKS:
        if any(t.startswith(mark) for t in vocab):
            return mark
    return ""


def target_ids(tokenizer: Any, text: str) -> list[int]:
    """The answer tokens a position predicts: the target text and eos (drake_bench.models.engine's training labels)."""
    return tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]


def same_token_space(a: Any, b: Any, texts: Sequence[str]) -> bool:
    """Whether two tokenizers give every text the same answer token ids meaning the same tokens (logits of one can be
    compared with the other's position by position)."""
    if a is b:
        return True
    for text in texts:
        ids = target_ids(a, text)
        if ids != target_ids(b, text) or a.convert_ids_to_tokens(ids) != b.convert_ids_to_tokens(ids):
            return False
    return True


class TokenAligner:
    """Moves top-k rows from a sender tokenizer onto a receiver tokenizer's answer tokens (module docstring)."""

    def __init__(self, sender: Any, receiver: Any):
        self.sender, self.receiver = sender, receiver
        self.sender_vocab, self.receiver_vocab = sender.get_vocab(), receiver.get_vocab()
        self.identical = sender is receiver or self.sender_vocab == self.receiver_vocab
        self._sender_mark, self._receiver_mark = _mark(self.sender_vocab), _mark(self.receiver_vocab)
        self._receiver_tokens = list(self.receiver_vocab)
        self._special = {}
        for role in ("eos_token_id", "bos_token_id", "pad_token_id", "unk_token_id"):
            s, r = getattr(sender, role, None), getattr(receiver, role, None)
            if s is not None and r is not None:
                self._special.setdefault(int(s), int(r))
        self.map_id = lru_cache(maxsize=None)(self._map_id)

    def translate(self, token: str) -> str:
        """A sender token string with the sender's word-start mark replaced by the receiver's."""
        return token.replace(self._sender_mark, self._receiver_mark) if self._sender_mark else token

    def _map_id(self, sender_id: int) -> int:
        """The receiver id of one sender token: by role for special tokens, the same string (word mark translated),
        else the receiver token at the least edit distance (ties: the first in vocabulary order)."""
        if sender_id in self._special:
            return self._special[sender_id]
        token = self.sender.convert_ids_to_tokens([sender_id])[0]
        if token in self.receiver_vocab:
            return self.receiver_vocab[token]
        token = self.translate(token)
        if token in self.receiver_vocab:
            return self.receiver_vocab[token]
        best = min(self._receiver_tokens, key=lambda t: edit_distance(token, t))
        return self.receiver_vocab[best]

    def align(self, text: str, logits: torch.Tensor, indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The sender's rows for ``text`` (its answer positions x k logits and sender ids) as rows on the receiver's
        answer positions (receiver positions x k logits and receiver ids)."""
        s_ids, r_ids = target_ids(self.sender, text), target_ids(self.receiver, text)
        if len(s_ids) != logits.shape[0]:
            raise ValueError(f"{logits.shape[0]} sender rows for {len(s_ids)} sender answer tokens of {text!r}")
        if self.identical and s_ids == r_ids:
            return logits, indices
        k = logits.shape[1]
        s_tokens = self.sender.convert_ids_to_tokens(s_ids)
        r_tokens = self.receiver.convert_ids_to_tokens(r_ids)
        matched = dtw(s_tokens, r_tokens)
        out_logits = torch.full((len(r_ids), k), PAD_LOGIT, dtype=logits.dtype)
        out_indices = torch.empty((len(r_ids), k), dtype=indices.dtype)
        for i, js in enumerate(matched):
            out_indices[i] = r_ids[i]
            entries: list[tuple[int, float]] = []
            if len(js) == 1 and (
                self.translate(s_tokens[js[0]]) == r_tokens[i] or self.map_id(s_ids[js[0]]) == r_ids[i]
            ):
                seen: set[int] = set()
                for logit, sid in zip(logits[js[0]].tolist(), indices[js[0]].tolist()):
                    rid = self.map_id(int(sid))
                    if rid not in seen and logit > PAD_LOGIT:
                        seen.add(rid)
                        entries.append((rid, logit))
            if not entries:  # one-hot on the token this position predicts
                entries = [(r_ids[i], 0.0)]
            for e, (rid, logit) in enumerate(entries[:k]):
                out_indices[i, e], out_logits[i, e] = rid, logit
            out_indices[i, len(entries) :] = entries[0][0]
        return out_logits, out_indices
