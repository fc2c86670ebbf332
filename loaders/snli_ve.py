"""SNLI-VE (Xie et al. 2019): image premise + text hypothesis -> entailment / neutral / contradiction.

Format, as published (checked 2025-05 against the authors' repository ``necla-ml/SNLI-VE`` at e6cf745:
README "SNLI-VE Creation", ``vet/tools/snli_ve_generator.py``, ``vet/tools/snli_ve_parser.py`` and
``data/download``): the generator writes ``data/snli_ve_{train,dev,test}.jsonl`` -- SNLI's rows
(``sentence1``, ``sentence2`` the hypothesis, ``gold_label``, ``pairID``, ``captionID`` ...) with rows of
gold label ``-`` dropped and the Flickr30k image id added. Its current version names that field
``Flickr30K_ID`` (the id without ``.jpg``); files made with the earlier version, which the bundled
parser reads, name it ``Flikr30kID`` (sic), and the README says ``Flickr30kID``: all three are read.
Images: ``data/download`` fetches ``flickr30k_images.tar.gz`` into ``data/Flickr30K/`` and unpacks
``flickr30k_images/`` (linked as ``images``), files ``<id>.jpg``.
Local root ``<source_dir>/SNLI-VE/`` (the jsonl files directly or under ``data/``; the image folder
``flickr30k_images/``, ``Flickr30K/flickr30k_images/`` or ``data/Flickr30K/flickr30k_images/``).
Rule: keyword categories on the hypothesis standing in for the paper's GPT judgement [R].
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
)

LABELS = ["entailment", "neutral", "contradiction"]
ID_FIELDS = ("Flickr30K_ID", "Flikr30kID", "Flickr30kID")
DOWNLOAD = (
    "github.com/necla-ml/SNLI-VE (run vet/tools/snli_ve_generator.py: data/snli_ve_*.jsonl) and "
    "storage.googleapis.com/allennlp-public-data/snli-ve/flickr30k_images.tar.gz"
)


def image_id(row: dict, where: str) -> str:
    for key in ID_FIELDS:
        if key in row:
            fid = str(row[key])
            return fid if fid.endswith(".jpg") else fid + ".jpg"
    raise SourceError(
        f"{where}: row {row.get('pairID')!r} has none of the image id fields {list(ID_FIELDS)}; got keys {sorted(row)[:12]}"
    )


class SNLIVELoader:
    name = "snli_ve"

    def layout(self, task: TaskSpec) -> list[Need]:
        root = root_name(task)
        splits = task.source.rule.get("splits", ["train", "dev", "test"])
        return [
            *(
                Need(
                    f"SNLI-VE {s} split",
                    (f"{root}/snli_ve_{s}.jsonl", f"{root}/data/snli_ve_{s}.jsonl"),
                    required=False,
                    download=DOWNLOAD,
                )
                for s in splits
            ),
            Need(
                "Flickr30k images",
                (
                    f"{root}/flickr30k_images",
                    f"{root}/Flickr30K/flickr30k_images",
                    f"{root}/data/Flickr30K/flickr30k_images",
                    f"{root}/Flickr30K/images",
                    f"{root}/data/Flickr30K/images",
                ),
                kind="images",
                download=DOWNLOAD,
            ),
        ]

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        source_root(task, source_dir)
        needs = self.layout(task)
        found = [(n, n.find(source_dir)) for n in needs[:-1]]
        if not any(hits for _, hits in found):
            raise SourceError(
                f"task {task.id!r}: no SNLI-VE split file under {source_dir}; expected "
                + ", ".join(n.paths[0] for n in needs[:-1])
                + f" ({DOWNLOAD})"
            )
        images = needs[-1].find_one(source_dir, task)
        out = []
        for _, hits in found:
            for path in hits:
                for r in read_jsonl(path, "SNLI-VE lines {Flickr30K_ID, sentence2, gold_label, pairID}"):
                    hyp, label = field(r, "sentence2", path), field(r, "gold_label", path)
                    if label not in LABELS or not keyword_rule_matches(hyp, task.source.rule):
                        continue
                    img = open_image(images / image_id(r, str(path)), str(path))
                    out.append(
                        make_sample(
                            task,
                            str(field(r, "pairID", path)),
                            f'Does the image entail, contradict, or is it neutral to the statement: "{hyp}"?',
                            label,
                            images=[img],
                            choices=list(LABELS),
                        )
                    )
        yield from finish(task, out)


register_loader(SNLIVELoader())
