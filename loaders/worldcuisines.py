"""WorldCuisines VQA (``worldcuisines/vqa``): dish-name (task 1) and location (task 2) questions.

Format, as published (checked 2025-05 against the authors' repository ``worldcuisines/worldcuisines``
at d4d1c44: ``generate_vqa/generated_data/hf_prompt/<folder>/<lang>_<folder>.jsonl``, the same
``hf_prompt/`` tree the Hub dataset ``worldcuisines/vqa`` ships, and ``generate_vqa/sampling.py`` /
``generate_vqa/resources/query_ctx.csv`` for the prompt types):

* folders ``train_task{1,2}``, ``small_eval_task{1,2}`` and ``large_eval_task{1,2}`` (the Hub
  configs ``task1``/``task2`` call them splits ``train`` / ``test_small`` / ``test_large``), one
  JSON-lines file per language (``en_train_task1.jsonl`` ...);
* each row: ``qa_id``, ``lang``, ``food_id``, ``prompt_id``, ``prompt_type`` (a string: ``"1"`` dish
  name without context, ``"2"`` location, ``"3"`` dish name with context, ``"4"`` dish name with
  adversarial context), ``multi_choice_prompt`` (stem, then options ``1. ..`` to ``5. ..`` one per
  line, then a blank line and the instruction "Print only the answer with a single answer id
  (1,2,3,4,5)."), ``open_ended_prompt``, ``image_url`` (a Wikimedia URL ending in ``?download``),
  ``answer`` (the dish name / location), ``multi_choice_answer`` (the option number, counted from 1),
  ``task``, ``lang_status``.

Images: the authors' evaluation (``evaluation/src/base_model.py``) takes them from the knowledge base
``worldcuisines/food-kb`` (Parquet ``data/*.parquet``; columns ``image1_url`` .. ``image8_url`` and
``image1`` .. ``image8`` = ``{bytes, path}``), matching a row's ``image_url``; that is the layout read
here (``<source_dir>/food-kb/data/*.parquet``). Also accepted: image files under ``<root>/images/``
named by the URL's file name without its query (``Foo.jpg`` for ``.../Foo.jpg?download``) -- how the
KB's ``images.tar.gz`` names its files could not be confirmed, so that variant warns.
Rule: ``task`` (1|2), ``prompt_type`` ("1".."4"), ``lang``, ``split`` (train | test_small | test_large).
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
    Need,
    field,
    finish,
    hub_rows,
    make_sample,
    note_read,
    open_image,
    read_jsonl,
    root_name,
    url_file_name,
)

SPLIT_FOLDERS = {"train": "train_task{k}", "test_small": "small_eval_task{k}", "test_large": "large_eval_task{k}"}
PROMPT_TYPES = {
    "1": "dish name, no context",
    "2": "location",
    "3": "dish name, with context",
    "4": "dish name, adversarial context",
}
KB = "food-kb"
_OPTION = re.compile(r"^\s*(\d+)\.\s+(.*?)\s*$")
DOWNLOAD = "huggingface.co/datasets/worldcuisines/vqa (hf_prompt/) and huggingface.co/datasets/worldcuisines/food-kb (data/*.parquet: the images)"


def split_numbered_options(text: str) -> tuple[str, list[str]]:
    """Split a ``multi_choice_prompt`` into its stem and options; the instruction after the options is dropped.

    Options are the consecutive lines ``1. ..``, ``2. ..`` (numbered from 1); the first blank or other
    line after them ends the list, so the trailing "Print only the answer ..." line never joins the last option.
    """
    lines = text.strip().splitlines()
    stem: list[str] = []
    opts: list[str] = []
    for line in lines:
        m = _OPTION.match(line)
        if m and int(m.group(1)) == len(opts) + 1:
            opts.append(m.group(2))
        elif opts:
            break
        else:
            stem.append(line)
    return "\n".join(stem).strip(), opts


def folder_name(task: TaskSpec) -> str:
    rule = task.source.rule
    split = rule.get("split", "train")
    if split not in SPLIT_FOLDERS:
        raise SourceError(f"task {task.id!r}: WorldCuisines split {split!r} is not one of {sorted(SPLIT_FOLDERS)}")
    return SPLIT_FOLDERS[split].format(k=rule["task"])


def _prompt_dirs(task: TaskSpec) -> tuple[str, ...]:
    root, folder = root_name(task), folder_name(task)
    return (f"{root}/hf_prompt/{folder}", f"worldcuisines/generate_vqa/generated_data/hf_prompt/{folder}")


def row_to_sample(task: TaskSpec, row: dict[str, Any], images: "_Images", where: str) -> Sample | None:
    rule = task.source.rule
    if "lang" in rule and str(field(row, "lang", where)) != rule["lang"]:
        return None
    if "prompt_type" in rule and str(field(row, "prompt_type", where)) != str(rule["prompt_type"]):
        return None
    qid = row.get("qa_id")
    text = str(field(row, "multi_choice_prompt", where, "WorldCuisines multi_choice_prompt (stem + numbered options)"))
    stem, opts = split_numbered_options(text)
    n = field(row, "multi_choice_answer", where, "WorldCuisines multi_choice_answer (option number from 1)")
    if not opts or not isinstance(n, int) and not str(n).strip().isdigit() or not 1 <= int(n) <= len(opts):
        raise SourceError(
            f"{where}: row {qid!r} multi_choice_answer {n!r} is not an option number 1..{len(opts)} of its multi_choice_prompt"
        )
    answer = opts[int(n) - 1]
    if task.answer_type != AnswerType.MULTIPLE_CHOICE:
        answer, opts, stem = (
            str(field(row, "answer", where)),
            [],
            str(field(row, "open_ended_prompt", where)).split("\n\n")[0],
        )
    url = str(field(row, "image_url", where))
    key = f"{rule.get('split', 'train')}-{qid}-{row['lang']}"
    return make_sample(
        task,
        key,
        stem,
        answer,
        images=[images.get(url, f"{where} row {qid}")],
        choices=opts,
        meta={"prompt_type": str(row.get("prompt_type")), "lang": row["lang"], "food_id": row.get("food_id")},
    )


class _Images:
    """Image lookup by ``image_url``: the food-kb Parquet files (the authors' way), else ``<root>/images/<file name>``."""

    def __init__(self, kb_files: list[Path], folder: Path | None, wanted: set[str]):
        self.by_url: dict[str, Any] = {}
        self.folder = folder
        for f in kb_files:
            self._scan(f, wanted)

    def _scan(self, path: Path, wanted: set[str]) -> None:
        import pyarrow.parquet as pq

        note_read(path)
        pf = pq.ParquetFile(path)
        names = pf.schema_arrow.names
        pairs = [
            (f"image{i}_url", f"image{i}") for i in range(1, 9) if f"image{i}_url" in names and f"image{i}" in names
        ]
        if not pairs:
            raise SourceError(
                f"{path}: no image<i>_url / image<i> columns (expected the worldcuisines/food-kb knowledge base)"
            )
        for batch in pf.iter_batches(columns=[c for p in pairs for c in p], batch_size=64):
            cols = batch.to_pydict()
            for ucol, icol in pairs:
                for url, img in zip(cols[ucol], cols[icol]):
                    if url in wanted and url not in self.by_url and img is not None:
                        self.by_url[url] = img

    def get(self, url: str, where: str) -> Any:
        import io

        from PIL import Image

        if url in self.by_url:
            value = self.by_url[url]
            data = value.get("bytes") if isinstance(value, dict) else value
            with Image.open(io.BytesIO(data)) as im:
                return im.convert("RGB")
        if self.folder is not None:
            name = url_file_name(url)
            for candidate in (name, Path(urlsplit_path(url)).name):
                if (self.folder / candidate).is_file():
                    return open_image(self.folder / candidate, where)
            raise SourceError(f"{where}: image {url} is neither in food-kb nor at {self.folder / name}")
        raise SourceError(
            f"{where}: image {url} not found in the food-kb Parquet files (worldcuisines/food-kb data/*.parquet)"
        )


def urlsplit_path(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).path


class WorldCuisinesLoader:
    name = "worldcuisines"
    unconfirmed = (
        "images under <root>/images/ named by the URL's file name: the layout of food-kb's images.tar.gz "
        "was not confirmed (the food-kb Parquet files, the authors' own image source, are)",
    )

    def layout(self, task: TaskSpec) -> list[Need]:
        lang = task.source.rule.get("lang")
        dirs = _prompt_dirs(task)
        files = tuple(f"{d}/{lang}_{d.rsplit('/', 1)[1]}.jsonl" for d in dirs) if lang else ()
        return [
            Need(
                f"WorldCuisines {folder_name(task)} rows",
                files + tuple(f"{d}/*.jsonl" for d in dirs),
                download=DOWNLOAD,
            ),
            Need(
                "WorldCuisines images (food-kb knowledge base)",
                (f"{KB}/data/*.parquet", f"{root_name(task)}/images"),
                kind="images",
                download="huggingface.co/datasets/worldcuisines/food-kb",
            ),
        ]

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        rule = task.source.rule
        if source_dir is None:
            split = rule.get("split", "train")
            rows = list(hub_rows(task, config=f"task{rule['task']}", split=split))
            files: list[tuple[str, list[dict]]] = [(task.source.hub_repo or "", rows)]
        else:
            need = self.layout(task)[0]
            paths = need.find(source_dir)
            if not paths:
                need.find_one(source_dir, task)
            files = [(str(p), read_jsonl(p, "WorldCuisines hf_prompt rows")) for p in paths]
        keep = [
            (w, r)
            for w, rows in files
            for r in rows
            if str(r.get("lang")) == str(rule.get("lang", r.get("lang")))
            and str(r.get("prompt_type")) == str(rule.get("prompt_type", r.get("prompt_type")))
        ]
        wanted = {str(r.get("image_url")) for _, r in keep}
        kb = sorted((Path(source_dir) / KB / "data").glob("*.parquet")) if source_dir is not None else []
        folder = Path(source_dir) / root_name(task) / "images" if source_dir is not None else None
        if source_dir is not None and keep and not kb and not (folder is not None and folder.is_dir()):
            raise SourceError(
                f"task {task.id!r}: no WorldCuisines images: expected the food-kb knowledge base at "
                f"{Path(source_dir) / KB / 'data'}/*.parquet (or image files under {folder}); download {DOWNLOAD}"
            )
        images = _Images(kb, folder if folder is not None and folder.is_dir() else None, wanted)
        out = [row_to_sample(task, r, images, w) for w, r in keep]
        yield from finish(task, (s for s in out if s is not None))


register_loader(WorldCuisinesLoader())
