"""VQA v1/v2 format (Antol et al. 2015), used for HFLB's Abstract VQA client.

Format: questions file ``{"questions": [{image_id, question, question_id}]}`` and annotations file
``{"annotations": [{question_id, image_id, question_type, answer_type, multiple_choice_answer,
answers: [{answer, answer_confidence, answer_id}]}]}``; abstract-scene images named
``abstract_v002_<subtype>_<image_id:012d>.png``.
Checked: the VQA API README (v1 abstract release: 20k/10k/20k images, 3 questions per image) and
stored code using ``Annotations/%s_%s_annotations.json`` / ``Questions/%s_%s_%s_questions.json`` with
dataType 'abstract_v002'.
Rule: ``answer_type`` (yes/no | number | other), ``question_prefixes`` / ``exclude_question_prefixes``,
``subtypes`` (default train2015, val2015).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ..sample import Sample
from ..spec import TaskSpec
from . import register_loader
from ._common import field, finish, make_sample, open_image, read_json, source_root


class VQAv2Loader:
    name = "vqa_v2"

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        root = source_root(task, source_dir)
        rule = task.source.rule
        out = []
        for sub in rule.get("subtypes", ["train2015", "val2015"]):
            qpath = root / "Questions" / f"OpenEnded_abstract_v002_{sub}_questions.json"
            apath = root / "Annotations" / f"abstract_v002_{sub}_annotations.json"
            if not qpath.is_file():
                continue
            qs = {q["question_id"]: q for q in field(read_json(qpath, "VQA questions {questions: [...]}"), "questions", qpath)}
            for a in field(read_json(apath, "VQA annotations {annotations: [...]}"), "annotations", apath):
                if a["answer_type"] not in rule.get("answer_type", [a["answer_type"]]):
                    continue
                q = qs[field(a, "question_id", apath)]
                text = q["question"]
                low = text.lower()
                if "question_prefixes" in rule and not any(low.startswith(p) for p in rule["question_prefixes"]):
                    continue
                if "exclude_question_prefixes" in rule and any(low.startswith(p) for p in rule["exclude_question_prefixes"]):
                    continue
                img = open_image(root / "images" / sub / f"abstract_v002_{sub}_{a['image_id']:012d}.png", str(apath))
                ans = field(a, "multiple_choice_answer", apath)
                choices = ["yes", "no"] if a["answer_type"] == "yes/no" else []
                out.append(make_sample(task, f"{sub}-{a['question_id']}", text, ans, images=[img], choices=choices,
                                       meta={"answer_type": a["answer_type"], "question_type": a.get("question_type")}))
        yield from finish(task, out)


register_loader(VQAv2Loader())
