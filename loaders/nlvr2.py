"""NLVR2 (Suhr et al. 2019) original release: a sentence about an image pair, True/False.

Format, as published (checked 2025-05 against ``lil-lab/nlvr`` at 1892484: ``nlvr2/README.md`` and
``nlvr2/data/dev.json``): ``nlvr2/data/{train,dev,test1,test2}.json``, JSON lines with ``identifier``
(``<split>-<set_id>-<pair_id>-<sentence_id>``), ``sentence``, ``label`` (``"True"``/``"False"``),
``left_url``, ``right_url`` and, in train, ``directory`` (one of 100 buckets). The images of an example
are named ``<split>-<set_id>-<pair_id>-img0.png`` / ``-img1.png``; ``util/download_images.py`` saves
them flat into the folder it is given, the images sent on request come per split [the request-only
archive layout is not confirmed: ``images/<split>/<directory>/`` is also accepted for train].
Local root ``<source_dir>/NLVR2/``: ``data/<split>.json`` (or ``nlvr2/data/``) and ``images/<split>/``.
Rule: keyword categories on the sentence standing in for the paper's GPT judgement [R].
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from drake_bench.benchmarks.sample import Sample
from drake_bench.benchmarks.spec import TaskSpec
from drake_bench.errors import SourceError

from . import register_loader
from ._common import (
    Need,
    field,
    finish,
    keyword_rule_matches,
    make_sample,
    open_image,
    read_jsonl,
    root_name,
    source_root,
    yes_no,
)

DOWNLOAD = "github.com/lil-lab/nlvr (nlvr2/data/*.json); images via nlvr2/util/download_images.py or the request form in nlvr2/README.md"


class NLVR2Loader:
    name = "nlvr2"
    unconfirmed = ("the folder layout of NLVR2's request-only image archive",)

    def layout(self, task: TaskSpec) -> list[Need]:
        root = root_name(task)
        splits = task.source.rule.get("splits", ["train", "dev", "test1"])
        needs = []
        for s in splits:
            needs.append(
                Need(
                    f"NLVR2 {s} sentences",
                    (f"{root}/data/{s}.json", f"{root}/nlvr2/data/{s}.json"),
                    required=False,
                    download=DOWNLOAD,
                )
            )
            needs.append(
                Need(
                    f"NLVR2 {s} images",
                    (f"{root}/images/{s}", f"{root}/{s}"),
                    kind="images",
                    required=False,
                    download=DOWNLOAD,
                )
            )
        return needs

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        source_root(task, source_dir)
        splits = task.source.rule.get("splits", ["train", "dev", "test1"])
        needs = self.layout(task)
        out, read_any = [], False
        for split, sent_need, img_need in zip(splits, needs[0::2], needs[1::2]):
            hits = sent_need.find(source_dir)
            if not hits:
                continue
            read_any = True
            path, img_dir = hits[0], img_need.find_one(source_dir, task)
            for r in read_jsonl(path, "NLVR2 lines {identifier, sentence, label}"):
                sent = field(r, "sentence", path)
                if not keyword_rule_matches(sent, task.source.rule):
                    continue
                ident = field(r, "identifier", path)
                stem = ident.rsplit("-", 1)[0]
                folder = (
                    img_dir / str(r["directory"])
                    if "directory" in r and (img_dir / str(r["directory"])).is_dir()
                    else img_dir
                )
                imgs = [open_image(folder / f"{stem}-img{k}.png", str(path)) for k in (0, 1)]
                out.append(
                    make_sample(
                        task,
                        ident,
                        f'Is this statement true about the two images? "{sent}"',
                        yes_no(str(field(r, "label", path))) or "no",
                        images=imgs,
                        choices=["yes", "no"],
                    )
                )
        if not read_any:
            raise SourceError(
                f"task {task.id!r}: no NLVR2 sentence file under {source_dir}; expected "
                + ", ".join(n.paths[0] for n in needs[0::2])
                + f" ({DOWNLOAD})"
            )
        yield from finish(task, out)


register_loader(NLVR2Loader())
