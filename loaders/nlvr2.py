"""NLVR2 (Suhr et al. 2019) original release: a sentence about an image pair, True/False.

Format: ``data/<split>.json`` in JSON-lines with ``identifier`` (``<split>-<set>-<pair>-<sentence>``),
``sentence``, ``label`` ("True"/"False"), ``left_url``, ``right_url``; images
``images/<split>/<split>-<set>-<pair>-img0.png`` and ``-img1.png``. [I: from the NLVR2 repo README.]
Rule: keyword categories on the sentence standing in for the paper's GPT judgement [R].
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ..sample import Sample
from ..spec import TaskSpec
from . import register_loader
from ._common import field, finish, keyword_rule_matches, make_sample, open_image, read_jsonl, source_root, yes_no


class NLVR2Loader:
    name = "nlvr2"

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        root = source_root(task, source_dir)
        out = []
        for split in task.source.rule.get("splits", ["train", "dev", "test1"]):
            path = root / "data" / f"{split}.json"
            if not path.is_file():
                continue
            for r in read_jsonl(path, "NLVR2 lines {identifier, sentence, label}"):
                sent = field(r, "sentence", path)
                if not keyword_rule_matches(sent, task.source.rule):
                    continue
                ident = field(r, "identifier", path)
                stem = ident.rsplit("-", 1)[0]
                imgs = [open_image(root / "images" / split / f"{stem}-img{k}.png", str(path)) for k in (0, 1)]
                out.append(make_sample(task, ident, f'Is this statement true about the two images? "{sent}"',
                                       yes_no(str(field(r, "label", path))) or "no", images=imgs, choices=["yes", "no"]))
        yield from finish(task, out)


register_loader(NLVR2Loader())
