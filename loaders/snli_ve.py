"""SNLI-VE (Xie et al. 2019): image premise + text hypothesis -> entailment / neutral / contradiction.

Format: ``snli_ve_<split>.jsonl`` lines with SNLI's fields (``sentence1`` caption, ``sentence2``
hypothesis, ``gold_label``, ``pairID``, ``captionID``) plus ``Flikr30kID`` (sic, the Flickr30k image
file); images in ``flickr30k_images/``. [I: from the SNLI-VE repo README; not in the stored docs.]
Rule: keyword categories on the hypothesis standing in for the paper's GPT judgement [R].
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ..sample import Sample
from ..spec import TaskSpec
from . import register_loader
from ._common import field, finish, keyword_rule_matches, make_sample, open_image, read_jsonl, source_root

LABELS = ["entailment", "neutral", "contradiction"]


class SNLIVELoader:
    name = "snli_ve"

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        root = source_root(task, source_dir)
        out = []
        for split in task.source.rule.get("splits", ["train", "dev", "test"]):
            path = root / f"snli_ve_{split}.jsonl"
            if not path.is_file():
                continue
            for r in read_jsonl(path, "SNLI-VE lines {Flikr30kID, sentence2, gold_label, pairID}"):
                hyp, label = field(r, "sentence2", path), field(r, "gold_label", path)
                if label not in LABELS or not keyword_rule_matches(hyp, task.source.rule):
                    continue
                fid = str(field(r, "Flikr30kID", path))
                img = open_image(root / "flickr30k_images" / (fid if fid.endswith(".jpg") else fid + ".jpg"), str(path))
                out.append(make_sample(task, str(field(r, "pairID", path)),
                                       f'Does the image entail, contradict, or is it neutral to the statement: "{hyp}"?',
                                       label, images=[img], choices=list(LABELS)))
        yield from finish(task, out)


register_loader(SNLIVELoader())
