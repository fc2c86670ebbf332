"""WorldCuisines VQA (``worldcuisines/vqa``): dish-name (task 1) and location (task 2) questions.

Format: configs ``task1`` / ``task2`` with splits ``train`` / ``test_small`` / ``test_large``; locally
the repo's ``hf_prompt/<split>_task<k>/*.jsonl`` files. Rows carry ``qa_id``, ``lang``,
``prompt_type`` (no-context / context / adversarial variants), ``question`` (or ``prompt``; options
numbered ``1. .. 2. ..``), ``mcq_answer_index``, ``answer`` and ``image_url``.
Checked: the project README (2 tasks; no-context, contextualized and adversarial prompts), the Hub
tree (``hf_prompt/train_task1`` ... ``*_train_task2.jsonl``) and stored public code selecting
``['question', 'qa_id', 'lang', 'prompt_type', 'mcq_answer_index', 'answer']`` and parsing numbered
options. Images are the ``image_url`` files, stored locally under ``images/<basename>`` [I].
Rule: ``task`` (1|2), ``context`` (substring of ``prompt_type``; task 1), ``lang``, ``split`` (default train).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import SourceError
from ..sample import AnswerType, Sample
from ..spec import TaskSpec
from . import register_loader
from ._common import field, finish, hub_rows, image_from_value, make_sample, read_jsonl, source_root


def split_numbered_options(text: str) -> tuple[str, list[str]]:
    parts = re.split(r"\s+(\d+)\. ", text.strip())
    stem, opts = parts[0].strip(), [parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)]
    return stem, opts


def _prompt_kind(ptype: str) -> str:
    p = ptype.lower()
    if "adv" in p:
        return "adversarial"
    if "no" in p and "context" in p or p in ("", "casual", "formal"):
        return "no-context"
    return "context" if "context" in p else "no-context"


def row_to_sample(task: TaskSpec, row: dict[str, Any], img_root: Path, where: str):
    rule = task.source.rule
    if "lang" in rule and field(row, "lang", where) != rule["lang"]:
        return None
    if rule.get("task") == 1 and "context" in rule and _prompt_kind(str(row.get("prompt_type", ""))) != rule["context"]:
        return None
    text = row.get("question", row.get("prompt"))
    if text is None:
        raise SourceError(f"{where}: row {row.get('qa_id')!r} has neither 'question' nor 'prompt'")
    stem, opts = split_numbered_options(str(text))
    idx = row.get("mcq_answer_index")
    if task.answer_type == AnswerType.MULTIPLE_CHOICE and opts and idx is not None:
        i = int(idx)
        if not 0 <= i < len(opts):
            raise SourceError(f"{where}: row {row.get('qa_id')!r} mcq_answer_index {idx} outside its {len(opts)} options")
        answer, choices = opts[i], opts
    else:
        answer, choices, stem = str(field(row, "answer", where)), [], str(text)
    ref = row.get("image") or row.get("image_file") or Path(str(field(row, "image_url", where))).name
    key = f"{row['qa_id']}-{row['lang']}-{row.get('prompt_type', '')}"
    return make_sample(task, key, stem, answer, images=[image_from_value(ref, img_root, where)], choices=choices,
                       meta={"prompt_type": row.get("prompt_type"), "lang": row["lang"]})


class WorldCuisinesLoader:
    name = "worldcuisines"

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        rule = task.source.rule
        split = rule.get("split", "train")
        if source_dir is None:
            rows: Any = hub_rows(task, config=f"task{rule['task']}", split=split)
            img_root, files = Path("."), None
            out = [row_to_sample(task, r, img_root, task.source.hub_repo or "") for r in rows]
        else:
            root = source_root(task, source_dir)
            folder = root / "hf_prompt" / f"{split}_task{rule['task']}"
            files = sorted(folder.glob("*.jsonl"))
            if not files:
                raise SourceError(f"{folder}: no *.jsonl files (expected WorldCuisines hf_prompt/{split}_task{rule['task']}/*.jsonl)")
            out = [row_to_sample(task, r, root / "images", str(f)) for f in files for r in read_jsonl(f, "WorldCuisines rows")]
        yield from finish(task, (s for s in out if s is not None))


register_loader(WorldCuisinesLoader())
