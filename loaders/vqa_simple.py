"""Single-file QA sources: DVQA, VSR, VizWiz and AQUA (one loader class per format).

* **DVQA** (Kafle et al. 2018): ``qa/<rule.annotation>`` = list of ``{image, question, answer,
  question_id, template_id}``; images in ``images/``. [I: field names from the DVQA release README as
  commonly used; not found in the stored docs.]
* **VSR** (``cambridgeltl/vsr_random``): jsonl files of ``{image, image_link, caption, label,
  relation}`` (label 1 = the caption is true); images in ``images/``. Question = "Is this statement
  true? <caption>". Checked against the VSR dataset card / loading script on the Hub
  (``juletxara/visual-spatial-reasoning``: features image, image_link, caption, label = ClassLabel
  [False, True], relation).
* **VizWiz** VQA: ``annotations/<split>.json`` = list of ``{image, question, answers: [{answer,
  answer_confidence}], answer_type, answerable}``; images in ``<split>/``. Answer = the most frequent
  answer. [I: fields from the VizWiz VQA annotation format.]
* **AQUA** (Garcia et al. 2020): ``<split>.json`` = list of ``{image, question, answer,
  need_external_knowledge}``; images (SemArt) in ``images/``. Checked: a public AQUA card listing
  ``need_external_knowledge``, ``questions``, ``answers``, ``image``.

Partition rules: keyword rules on the question (``categories``/``rest``/``category`` or
``keywords``/``exclude_keywords``), see :func:`~drake_bench.loaders._common.keyword_rule_matches`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from ..errors import SourceError
from ..sample import Sample
from ..spec import TaskSpec
from . import register_loader
from ._common import field, finish, keyword_rule_matches, make_sample, open_image, read_json, read_jsonl, source_root


class DVQALoader:
    name = "dvqa"

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        root = source_root(task, source_dir)
        path = root / "qa" / task.source.rule["annotation"]
        out = []
        for r in read_json(path, "DVQA list of {image, question, answer, question_id}"):
            img = open_image(root / task.source.rule.get("image_dir", "images") / field(r, "image", path), str(path))
            out.append(make_sample(task, str(field(r, "question_id", path)), field(r, "question", path), str(field(r, "answer", path)),
                                   images=[img], meta={"template_id": r.get("template_id")}))
        yield from finish(task, out)


class VSRLoader:
    name = "vsr"

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        root = source_root(task, source_dir)
        out = []
        for fname in task.source.rule["files"]:
            path = root / fname
            if not path.is_file():
                continue
            for i, r in enumerate(read_jsonl(path, "VSR lines {image, caption, label, relation}")):
                label = int(field(r, "label", path))
                img = open_image(root / task.source.rule.get("image_dir", "images") / field(r, "image", path), str(path))
                out.append(make_sample(task, f"{Path(fname).stem}-{i}", f'Is this statement true about the image? "{field(r, "caption", path)}"',
                                       "yes" if label == 1 else "no", images=[img], choices=["yes", "no"], meta={"relation": r.get("relation")}))
        if not out:
            raise SourceError(f"{root}: none of the VSR files {task.source.rule['files']} found")
        yield from finish(task, out)


class VizWizLoader:
    name = "vizwiz"

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        root = source_root(task, source_dir)
        out = []
        for split in task.source.rule.get("splits", ["train", "val"]):
            path = root / "annotations" / f"{split}.json"
            if not path.is_file():
                continue
            for r in read_json(path, "VizWiz list of {image, question, answers, answer_type, answerable}"):
                q = field(r, "question", path)
                if r.get("answerable") == 0 or not keyword_rule_matches(q, task.source.rule):
                    continue
                answers = [a["answer"] for a in field(r, "answers", path) if a.get("answer")]
                if not answers:
                    continue
                answer = Counter(answers).most_common(1)[0][0]
                if answer == "unanswerable":
                    continue
                img = open_image(root / split / field(r, "image", path), str(path))
                out.append(make_sample(task, field(r, "image", path), q, answer, images=[img], meta={"answer_type": r.get("answer_type")}))
        yield from finish(task, out)


class AQUALoader:
    name = "aqua"

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        root = source_root(task, source_dir)
        out = []
        for split in task.source.rule.get("splits", ["train", "val", "test"]):
            path = root / f"{split}.json"
            if not path.is_file():
                continue
            for i, r in enumerate(read_json(path, "AQUA list of {image, question, answer, need_external_knowledge}")):
                q = field(r, "question", path)
                if not keyword_rule_matches(q, task.source.rule):
                    continue
                img = open_image(root / "images" / field(r, "image", path), str(path))
                out.append(make_sample(task, f"{split}-{i}", q, str(field(r, "answer", path)), images=[img],
                                       meta={"need_external_knowledge": r.get("need_external_knowledge")}))
        yield from finish(task, out)


for _loader in (DVQALoader(), VSRLoader(), VizWizLoader(), AQUALoader()):
    register_loader(_loader)
