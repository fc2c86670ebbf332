"""Single-file QA sources: DVQA, VSR, VizWiz and AQUA (one loader class per format).

* **DVQA** (Kafle et al. 2018): ``qa/<rule.annotation>`` = list of ``{image, question, answer,
  question_id, template_id}``; images in ``images/``. Not confirmed: field names from the DVQA release
  README as commonly used; the README itself was not found in the stored sources (the build warns).
* **VSR** (``cambridgeltl/vsr_random``): jsonl files of ``{image, image_link, caption, label,
  relation}`` (label 1 = the caption is true); images in ``images/``. Question = "Is this statement
  true? <caption>". Checked against the VSR dataset card / loading script on the Hub
  (``juletxara/visual-spatial-reasoning``: features image, image_link, caption, label = ClassLabel
  [False, True], relation). Not confirmed: the images folder (the card links COCO 2017 files; where the
  user unpacks them is not fixed by the publisher; the build warns).
* **VizWiz** VQA, as the task page vizwiz.org/tasks-and-datasets/vqa distributes it:
  ``Annotations.zip`` (vizwiz.cs.colorado.edu/VizWiz_final/vqa_data/Annotations.zip) unpacks to
  ``Annotations/{train,val,test}.json``, each a list of ``{image, question, answers: [{answer,
  answer_confidence}], answer_type, answerable}`` (``test.json`` has no answers); ``train.zip`` /
  ``val.zip`` (VizWiz_final/images/) unpack to ``train/VizWiz_train_00000000.jpg`` ... and ``val/``.
  Checked 2025-05: the VizWiz API demo (``Annotations/%s.json``), and public evaluation harnesses that
  download exactly these archives. Answer = the most frequent answer; unanswerable items are skipped.
* **AQUA** (Garcia et al. 2020): ``<split>.json`` = list of ``{image, question, answer,
  need_external_knowledge}``; images (SemArt) in ``images/``. Checked: a public AQUA card listing
  ``need_external_knowledge``, ``questions``, ``answers``, ``image``. Not confirmed: the release's file
  names and folders (github.com/noagarcia/ArtVQA was not in the stored sources; the build warns).

Every loader here describes its files (``layout``) for ``drake-bench sources check``; see docs/data-sources.md.
Partition rules: keyword rules on the question (``categories``/``rest``/``category`` or
``keywords``/``exclude_keywords``), see :func:`~drake_bench.loaders._common.keyword_rule_matches`.
"""

from __future__ import annotations

from collections import Counter
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
    read_json,
    read_jsonl,
    root_name,
    source_root,
)


class DVQALoader:
    name = "dvqa"
    unconfirmed = (
        "DVQA's qa/*.json field names and images/ folder (the release README was not found in the stored sources)",
    )

    def layout(self, task: TaskSpec) -> list[Need]:
        root, rule = root_name(task), task.source.rule
        dl = "github.com/kushalkafle/DVQA_dataset (qa.tar.gz, images.tar.gz)"
        return [
            Need("DVQA questions", (f"{root}/qa/{rule['annotation']}",), download=dl),
            Need("DVQA images", (f"{root}/{rule.get('image_dir', 'images')}",), kind="images", download=dl),
        ]

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        root = source_root(task, source_dir)
        path = self.layout(task)[0].find_one(source_dir, task)
        out = []
        for r in read_json(path, "DVQA list of {image, question, answer, question_id}"):
            img = open_image(root / task.source.rule.get("image_dir", "images") / field(r, "image", path), str(path))
            out.append(
                make_sample(
                    task,
                    str(field(r, "question_id", path)),
                    field(r, "question", path),
                    str(field(r, "answer", path)),
                    images=[img],
                    meta={"template_id": r.get("template_id")},
                )
            )
        yield from finish(task, out)


class VSRLoader:
    name = "vsr"
    unconfirmed = (
        "VSR's images/ folder (the card links COCO 2017 images; the folder the user unpacks them to is not fixed)",
    )

    def layout(self, task: TaskSpec) -> list[Need]:
        root, rule = root_name(task), task.source.rule
        dl = "huggingface.co/datasets/cambridgeltl/vsr_random (jsonl) and COCO 2017 images (github.com/cambridgeltl/visual-spatial-reasoning)"
        return [
            *(Need(f"VSR {f}", (f"{root}/{f}",), required=False, download=dl) for f in rule["files"]),
            Need("VSR images", (f"{root}/{rule.get('image_dir', 'images')}",), kind="images", download=dl),
        ]

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        root = source_root(task, source_dir)
        out = []
        for fname in task.source.rule["files"]:
            path = root / fname
            if not path.is_file():
                continue
            for i, r in enumerate(read_jsonl(path, "VSR lines {image, caption, label, relation}")):
                label = int(field(r, "label", path))
                img = open_image(
                    root / task.source.rule.get("image_dir", "images") / field(r, "image", path), str(path)
                )
                out.append(
                    make_sample(
                        task,
                        f"{Path(fname).stem}-{i}",
                        f'Is this statement true about the image? "{field(r, "caption", path)}"',
                        "yes" if label == 1 else "no",
                        images=[img],
                        choices=["yes", "no"],
                        meta={"relation": r.get("relation")},
                    )
                )
        if not out:
            raise SourceError(f"{root}: none of the VSR files {task.source.rule['files']} found")
        yield from finish(task, out)


class VizWizLoader:
    name = "vizwiz"
    DOWNLOAD = (
        "vizwiz.cs.colorado.edu/VizWiz_final/vqa_data/Annotations.zip and VizWiz_final/images/{split}.zip "
        "(unzip both into the source folder's VizWiz/)"
    )

    def layout(self, task: TaskSpec) -> list[Need]:
        root = root_name(task)
        needs = []
        for split in task.source.rule.get("splits", ["train", "val"]):
            dl = self.DOWNLOAD.format(split=split)
            needs.append(
                Need(
                    f"VizWiz {split} annotations",
                    (f"{root}/Annotations/{split}.json", f"{root}/annotations/{split}.json"),
                    download=dl,
                )
            )
            needs.append(Need(f"VizWiz {split} images", (f"{root}/{split}",), kind="images", download=dl))
        return needs

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        source_root(task, source_dir)
        needs = self.layout(task)
        out = []
        for ann_need, img_need in zip(needs[::2], needs[1::2]):
            path = ann_need.find_one(source_dir, task)
            img_dir = img_need.find_one(source_dir, task)
            rows = read_json(path, "VizWiz list of {image, question, answers, answer_type, answerable}")
            if not isinstance(rows, list):
                raise SourceError(f"{path}: expected a JSON list of VizWiz annotations, got {type(rows).__name__}")
            for r in rows:
                q = field(r, "question", path)
                if r.get("answerable") == 0 or not keyword_rule_matches(q, task.source.rule):
                    continue
                if "answers" not in r:
                    raise SourceError(
                        f"{path}: annotation {r.get('image')!r} has no answers (the test split carries none; use train/val)"
                    )
                answers = [a["answer"] for a in r["answers"] if a.get("answer")]
                if not answers:
                    continue
                answer = Counter(answers).most_common(1)[0][0]
                if answer == "unanswerable":
                    continue
                img = open_image(img_dir / field(r, "image", path), str(path))
                out.append(
                    make_sample(
                        task,
                        field(r, "image", path),
                        q,
                        answer,
                        images=[img],
                        meta={"answer_type": r.get("answer_type")},
                    )
                )
        yield from finish(task, out)


class AQUALoader:
    name = "aqua"
    unconfirmed = (
        "AQUA's <split>.json field names and the SemArt images/ folder (github.com/noagarcia/ArtVQA README not in the stored sources)",
    )

    def layout(self, task: TaskSpec) -> list[Need]:
        root = root_name(task)
        dl = "github.com/noagarcia/ArtVQA (AQUA json) and SemArt images (noagarcia.github.io/SemArt)"
        return [
            *(
                Need(f"AQUA {s}", (f"{root}/{s}.json",), required=False, download=dl)
                for s in task.source.rule.get("splits", ["train", "val", "test"])
            ),
            Need("AQUA images", (f"{root}/images",), kind="images", download=dl),
        ]

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
                out.append(
                    make_sample(
                        task,
                        f"{split}-{i}",
                        q,
                        str(field(r, "answer", path)),
                        images=[img],
                        meta={"need_external_knowledge": r.get("need_external_knowledge")},
                    )
                )
        yield from finish(task, out)


for _loader in (DVQALoader(), VSRLoader(), VizWizLoader(), AQUALoader()):
    register_loader(_loader)
