"""VQA v1/v2 format (Antol et al. 2015), used for HFLB's Abstract VQA client.

Format, as the VQA API lays it out (``GT-Vision-Lab/VQA`` at a013f00: README "Files" and
``PythonHelperTools/vqaDemo.py``): ``<dataDir>/Questions/OpenEnded_abstract_v002_<sub>_questions.json``
= ``{"questions": [{image_id, question, question_id}]}``, ``<dataDir>/Annotations/abstract_v002_<sub>_annotations.json``
= ``{"annotations": [{question_id, image_id, question_type, answer_type, multiple_choice_answer,
answers: [{answer, answer_confidence, answer_id}]}]}`` and, for abstract scenes,
``<dataDir>/Images/abstract_v002/<sub>/`` (sub = ``train2015``, ``val2015``, ``test2015``). The
abstract-scene image files are named ``abstract_v002_<sub>_<image_id:012d>.png`` [not confirmed: the
VQA v1 download page that ships them is not in the stored sources]; an older ``images/<sub>/`` folder is
also accepted. Local root ``<source_dir>/VQA/`` (the API's ``dataDir``).
Rule: ``answer_type`` (yes/no | number | other), ``question_prefixes`` / ``exclude_question_prefixes``,
``subtypes`` (default train2015, val2015).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from drake_bench.benchmarks.sample import Sample
from drake_bench.benchmarks.spec import TaskSpec
from drake_bench.errors import SourceError

from . import register_loader
from ._common import Need, field, finish, make_sample, open_image, read_json, root_name, source_root

DOWNLOAD = "visualqa.org/vqa_v1_download.html (abstract scenes: questions, annotations and images for {sub})"


class VQAv2Loader:
    name = "vqa_v2"
    unconfirmed = (
        "the abstract-scene image file names abstract_v002_<sub>_<image_id:012d>.png (VQA v1 download page not in the stored sources)",
    )

    def layout(self, task: TaskSpec) -> list[Need]:
        root, needs = root_name(task), []
        for sub in task.source.rule.get("subtypes", ["train2015", "val2015"]):
            dl = DOWNLOAD.format(sub=sub)
            needs += [
                Need(
                    f"VQA abstract {sub} questions",
                    (f"{root}/Questions/OpenEnded_abstract_v002_{sub}_questions.json",),
                    download=dl,
                ),
                Need(
                    f"VQA abstract {sub} annotations",
                    (f"{root}/Annotations/abstract_v002_{sub}_annotations.json",),
                    download=dl,
                ),
                Need(
                    f"VQA abstract {sub} images",
                    (f"{root}/Images/abstract_v002/{sub}", f"{root}/images/{sub}"),
                    kind="images",
                    download=dl,
                ),
            ]
        return needs

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        source_root(task, source_dir)
        rule = task.source.rule
        needs = self.layout(task)
        out = []
        for sub, (qn, an, imn) in zip(
            rule.get("subtypes", ["train2015", "val2015"]), zip(needs[0::3], needs[1::3], needs[2::3])
        ):
            qpath, apath, img_dir = (
                qn.find_one(source_dir, task),
                an.find_one(source_dir, task),
                imn.find_one(source_dir, task),
            )
            qs = {
                q["question_id"]: q
                for q in field(read_json(qpath, "VQA questions {questions: [...]}"), "questions", qpath)
            }
            for a in field(read_json(apath, "VQA annotations {annotations: [...]}"), "annotations", apath):
                if a["answer_type"] not in rule.get("answer_type", [a["answer_type"]]):
                    continue
                qid = field(a, "question_id", apath)
                if qid not in qs:
                    raise SourceError(f"{apath}: question {qid} has no entry in {qpath}")
                text = qs[qid]["question"]
                low = text.lower()
                if "question_prefixes" in rule and not any(low.startswith(p) for p in rule["question_prefixes"]):
                    continue
                if "exclude_question_prefixes" in rule and any(
                    low.startswith(p) for p in rule["exclude_question_prefixes"]
                ):
                    continue
                img = open_image(img_dir / f"abstract_v002_{sub}_{a['image_id']:012d}.png", str(apath))
                ans = field(a, "multiple_choice_answer", apath)
                choices = ["yes", "no"] if a["answer_type"] == "yes/no" else []
                out.append(
                    make_sample(
                        task,
                        f"{sub}-{qid}",
                        text,
                        ans,
                        images=[img],
                        choices=choices,
                        meta={"answer_type": a["answer_type"], "question_type": a.get("question_type")},
                    )
                )
        yield from finish(task, out)


register_loader(VQAv2Loader())
