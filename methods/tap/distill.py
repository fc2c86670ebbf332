"""Stage 2's distillation term (paper eq. 5-6) on generative clients.

The paper distils a classifier's logits (``[B, C]``) and, for its text generation head, the logits of every
decoder position (``[B, L, V]``; the reference code sums over the L positions, padding included). drake_bench's clients
generate their answers, so the distilled logits are the next-token distributions at the **answer tokens** (the
positions the task loss scores: the answer and its eos), summed over the tokens and divided by the number of items
of the key, as the reference code's ``batchmean`` divides by samples. Prompt positions are not distilled: the
teacher and the student read the same prompt, and the paper's decoder has no prompt positions either.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

TeacherLogits = list[dict[str, torch.Tensor]]
"""Per Stage-2 batch, per task key of the batch: the teacher's answer-token logits (tokens x vocabulary)."""


def distill_loss(student: torch.Tensor, teacher: torch.Tensor, temperature: float, items: int) -> torch.Tensor:
    """tau^2 KL(softmax(z_T / tau) || softmax(z_S / tau)) at every answer token, summed over the tokens and divided
    by the key's number of items. Exactly 0 when the two agree."""
    t = float(temperature)
    log_s = F.log_softmax(student / t, dim=-1)
    log_t = F.log_softmax(teacher / t, dim=-1)
    return F.kl_div(log_s, log_t, reduction="sum", log_target=True) * t * t / max(1, items)
