"""LLaVA-style conversation sources with image lists: M4-Instruct, Mantis-Instruct and user-converted JSON.

One loader serves every source that ships ``{id, image(s), conversation turns}`` records:

* **M4-Instruct** (``lmms-lab/M4-Instruct-Data``, LLaVA-NeXT-Interleave): one file
  ``m4_instruct_annotations.json`` (a list) at the repo root plus image folders/zips; each record has
  ``id``, ``image`` (a path or a list of paths relative to the repo root), ``conversations``
  (``[{"from": "human"|"gpt", "value": ...}]``, ``<image>`` placeholders in the text) and
  ``metadata`` whose ``dataset`` names the DEMON / source subset (e.g. ``RecipeQA_TextCloze``,
  with ``split``, ``num_sample``, ``task_instruction``).
  Checked: stored public code reading ``m4_instruct_annotations.json`` from a ``M4-Instruct-Data``
  root with ``item['metadata']['dataset']`` and list-valued ``image``; DEMON's per-subset metadata
  card (``dataset``, ``split``, ``num_sample``, ``task_instruction``).
  Not confirmed: the folders the image zips unpack to (image paths are read as the records give them,
  relative to the repo root; the build warns).
* **Mantis-Instruct** (``TIGER-Lab/Mantis-Instruct``): one folder per config (``dreamsim``,
  ``imagecode``, ``contrastive_caption`` ...) holding ``<split>-*.parquet`` (revision ``main``) and the
  image archives ``<split>_images.zip`` or ``<split>_images_part<k>.zip`` (revision ``script``).
  Parquet columns ``id``, ``images`` (list of ``{"bytes", "path"}``), ``conversation``
  (``[{"role": "user"|"assistant", "content": ...}]``), ``source``. Image paths are relative to the
  unpacked archive: checked 2025-05 against the authors' repository ``TIGER-AI-Lab/Mantis`` at f3a3192,
  ``data/upload_conv_dataset_to_hf.py`` (zip members written as ``image.relative_to(image_dir)``, the
  same string stored in ``images[].path``) and ``data/mantis-instruct-hf-module.py`` (the reader unpacks
  every ``<split>_images*.zip`` of a config into ``<config>/<split>_images/`` and joins each path to it).
  So images are read from ``<root>/<config>/<split>_images/<path>`` (unpack each zip there); rows whose
  ``images`` carry ``bytes`` need no files.
* **User-converted JSON** (FashionIQ, CIRR, IRFL, Bongard-*): the same LLaVA record layout in the file
  ``source.rule.annotation`` under ``<source_dir>/<subset>/``.

Local layout: ``<source_dir>/<repo basename or subset>/`` exactly as downloaded (images unpacked
next to the annotation file, paths as the records give them).

Rule keys: ``annotation`` (JSON file) or ``config`` (Mantis parquet folder); filters ``dataset``
(metadata.dataset), ``num_images``, ``question_contains``, ``question_type`` (``yes_no`` |
``how_what``), ``half`` (seeded 50/50 split of the pool), ``max_items``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from drake_bench.benchmarks.sample import AnswerType, Sample
from drake_bench.benchmarks.spec import TaskSpec
from drake_bench.errors import SourceError

from . import register_loader
from ._common import (
    LETTERS,
    Need,
    finish,
    hub_rows,
    image_from_value,
    in_half,
    make_sample,
    note_read,
    read_json,
    root_name,
    source_root,
    yes_no,
)

_OPTION = re.compile(r"^\s*\(?([A-H])[\).:]\s*(.+?)\s*$")
_HUMAN = {"human", "user"}
_BOT = {"gpt", "assistant"}


def _turns(rec: dict[str, Any], where: str) -> tuple[str, str]:
    conv = rec.get("conversations", rec.get("conversation"))
    if not isinstance(conv, list) or not conv:
        raise SourceError(
            f"{where}: record {rec.get('id')!r} lacks 'conversations' (LLaVA) / 'conversation' (Mantis) turns"
        )
    q = a = None
    for turn in conv:
        role = turn.get("from", turn.get("role"))
        text = turn.get("value", turn.get("content"))
        if role in _HUMAN and q is None:
            q = text
        elif role in _BOT and q is not None:
            a = text
            break
    if q is None or a is None:
        raise SourceError(f"{where}: record {rec.get('id')!r} has no human/user turn followed by a gpt/assistant turn")
    return q, a


def _images_of(rec: dict[str, Any]) -> list[Any]:
    imgs = rec.get("image", rec.get("images"))
    if imgs is None:
        return []
    return list(imgs) if isinstance(imgs, list) else [imgs]


def parse_options(question: str) -> tuple[str, list[str]]:
    """Split 'A. xxx' / '(B) yyy' option lines off a question; returns (stem, options)."""
    stem, opts = [], []
    for line in question.splitlines():
        m = _OPTION.match(line)
        if m and LETTERS[len(opts)] == m.group(1):
            opts.append(m.group(2))
        else:
            stem.append(line)
    return "\n".join(stem).strip(), opts


def _resolve_choice(answer: str, options: list[str]) -> str | None:
    a = answer.strip()
    m = re.match(r"^\(?([A-H])(?:[\).:]|$)", a)
    if m and LETTERS.index(m.group(1)) < len(options):
        return options[LETTERS.index(m.group(1))]
    for o in options:
        if a.lower().rstrip(".") == o.lower().rstrip("."):
            return o
    return None


def _question_type(q: str, a: str) -> str:
    if yes_no(a) is not None:
        return "yes_no"
    first = q.strip().lower().split(" ", 1)[0] if q.strip() else ""
    return "how_what" if first in ("how", "what", "what's", "which") else "other"


def record_to_sample(task: TaskSpec, rec: dict[str, Any], base: Path, where: str) -> Sample | None:
    """One LLaVA/Mantis record -> Sample, or None when the task's rule filters it out."""
    rule = task.source.rule
    meta = rec.get("metadata") or {}
    refs = _images_of(rec)
    if "dataset" in rule:
        ds = meta.get("dataset") if isinstance(meta, dict) else None
        if ds is None and refs and isinstance(refs[0], str):
            ds = refs[0].split("/", 1)[0]
        if ds != rule["dataset"]:
            return None
    if "num_images" in rule and len(refs) != rule["num_images"]:
        return None
    raw_q, raw_a = _turns(rec, where)
    q = re.sub(r"\s*<image>\s*", " ", raw_q).strip()
    rid = str(rec.get("id", rec.get("sample_id", "")))
    if not rid:
        raise SourceError(f"{where}: record without 'id'")
    if "question_contains" in rule and rule["question_contains"].lower() not in q.lower():
        return None
    if "question_type" in rule and _question_type(q, raw_a) != rule["question_type"]:
        return None
    if "half" in rule and not in_half(rid, rule["half"], rule.get("seed", 0)):
        return None
    stem, options = parse_options(q)
    choices: list[str] = []
    answer, atype = raw_a.strip(), task.answer_type
    if task.answer_type == AnswerType.YES_NO:
        yn = yes_no(answer)
        if yn is None:
            return None
        answer, choices = yn, ["yes", "no"]
    elif task.answer_type == AnswerType.MULTIPLE_CHOICE:
        resolved = _resolve_choice(answer, options) if options else None
        if resolved is None:
            atype = AnswerType.OPEN  # options not parseable: scored as a short open answer
        else:
            answer, choices = resolved, options
    images = [image_from_value(r, base, where) for r in refs]
    return make_sample(
        task,
        rid,
        stem if choices and options else q,
        answer,
        images=images,
        choices=choices,
        answer_type=atype,
        meta={
            "metadata_dataset": meta.get("dataset") if isinstance(meta, dict) else None,
            "options_parsed": bool(choices),
        },
    )


def _parquet_rows(folder: Path) -> Iterator[tuple[dict[str, Any], Path, str]]:
    """Rows of a Mantis-Instruct config folder with the folder their image paths are relative to (``<split>_images/``)."""
    import pyarrow.parquet as pq

    files = sorted(folder.glob("*.parquet"))
    if not files:
        raise SourceError(f"{folder}: no *.parquet files (expected Mantis-Instruct's train-*/val-*.parquet)")
    for f in files:
        note_read(f)
        split = f.name.split("-", 1)[0]
        for row in pq.read_table(f).to_pylist():
            yield row, folder / f"{split}_images", str(f)


M4_DOWNLOAD = "huggingface.co/datasets/lmms-lab/M4-Instruct-Data (m4_instruct_annotations.json and the image zips, unpacked beside it)"
MANTIS_DOWNLOAD = (
    "huggingface.co/datasets/TIGER-Lab/Mantis-Instruct: <config>/<split>-*.parquet (revision main) and "
    "<config>/<split>_images*.zip (revision script), each zip unpacked into <config>/<split>_images/"
)


class LlavaConversationLoader:
    name = "llava_conversation"
    unconfirmed = (
        "M4-Instruct's image folders after unzipping (paths are taken as the records give them, relative to the repo root)",
    )

    def layout(self, task: TaskSpec) -> list[Need]:
        rule, root = task.source.rule, root_name(task)
        if "config" in rule:
            return [
                Need(
                    f"Mantis-Instruct {rule['config']} rows",
                    (f"{root}/{rule['config']}/*.parquet",),
                    download=MANTIS_DOWNLOAD,
                ),
                Need(
                    f"Mantis-Instruct {rule['config']} images",
                    (f"{root}/{rule['config']}/*_images",),
                    kind="images",
                    required=False,
                    download=MANTIS_DOWNLOAD,
                ),
            ]
        dl = (
            M4_DOWNLOAD
            if task.source.hub_repo
            else f"convert the original {task.source.dataset} release to LLaVA conversation JSON ({rule['annotation']})"
        )
        return [Need(f"{task.source.dataset} conversations", (f"{root}/{rule['annotation']}",), download=dl)]

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        rule = task.source.rule
        rows: Any
        if source_dir is None:
            where = task.source.hub_repo or task.source.dataset
            rows = ((r, Path("."), where) for r in hub_rows(task, config=rule.get("config")))
        else:
            root = source_root(task, source_dir)
            if "config" in rule:
                rows = _parquet_rows(root / rule["config"])
            else:
                path = self.layout(task)[0].find_one(source_dir, task)
                data = read_json(path, "a JSON list of LLaVA records {id, image, conversations}")
                if not isinstance(data, list):
                    raise SourceError(f"{path}: expected a JSON list of LLaVA records, got {type(data).__name__}")
                rows = ((r, root, str(path)) for r in data)
        out = (record_to_sample(task, rec, base, where) for rec, base, where in rows)
        yield from finish(task, (s for s in out if s is not None))


register_loader(LlavaConversationLoader())
