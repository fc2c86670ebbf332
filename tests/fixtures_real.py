"""Fixture writers: tiny copies of each real source laid out and written as its publisher distributes it.

``write_fixtures(spec, root, per_task)`` writes, for every task of ``spec``, ``per_task`` items that its
partition rule selects, plus decoy items the rule must reject, into ``root`` laid out as each source is
published. Every writer cites where its format is documented (repository at a commit and path, or card
URL); the records are made up by hand (no published data is copied), their fields and layout are the
publisher's. Where the real format could not be confirmed the writer says so; the loader's docstring and
docs/data-sources.md say the same, and the build warns.
"""

from __future__ import annotations

import io
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from PIL import Image

from drake_bench.benchmarks.sample import AnswerType
from drake_bench.benchmarks.spec import BenchmarkSpec, TaskSpec
from drake_bench.loaders._common import in_half, root_name

MC, YN, OPEN = AnswerType.MULTIPLE_CHOICE, AnswerType.YES_NO, AnswerType.OPEN


def url_file(url: str) -> str:
    """The file name a downloaded ``image_url`` is saved under: the URL path's last part, %-escapes decoded, no query."""
    from urllib.parse import unquote, urlsplit

    return unquote(Path(urlsplit(url).path).name)


def png(path: Path, shade: int = 0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        Image.new("RGB", (8, 8), ((shade * 37) % 256, (shade * 91) % 256, 128)).save(path, format="PNG")


def png_bytes(shade: int = 0) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), ((shade * 37) % 256, (shade * 91) % 256, 128)).save(buf, format="PNG")
    return buf.getvalue()


def dump(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))


def jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def parquet(path: Path, rows: list[dict]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


# ----------------------------------------------------------------------------- LLaVA / M4-Instruct / Mantis
def _llava_qa(task: TaskSpec, i: int) -> tuple[str, str]:
    rule = task.source.rule
    word = rule.get("question_contains", "")
    if rule.get("question_type") == "how_what":
        return f"How is the {word} sharpness of this image?\nA. high\nB. low", "A"
    if task.answer_type == YN:
        return f"Is the {word} consistent across these images?", "Yes" if i % 2 else "No"
    if task.answer_type == MC:
        return f"Which option fits the {word} images best?\nA. first\nB. second\nC. third", "(B)"
    return f"Describe the {word} change.", f"make it brighter {i}"


def _llava_records(task: TaskSpec, n: int, img_prefix: str) -> list[dict]:
    rule = task.source.rule
    k = rule.get("num_images", max(1, task.num_images[0]))
    recs, j = [], 0
    while len(recs) < n:
        rid = f"{task.id}-{j}"
        j += 1
        if "half" in rule and not in_half(rid, rule["half"], rule.get("seed", 0)):
            continue
        q, a = _llava_qa(task, j)
        imgs = [f"{img_prefix}/{rid}-{m}.png" for m in range(k)]
        rec = {
            "id": rid,
            "image": imgs,
            "conversations": [{"from": "human", "value": "<image>" * k + "\n" + q}, {"from": "gpt", "value": a}],
        }
        if "dataset" in rule:
            rec["metadata"] = {
                "dataset": rule["dataset"],
                "split": "train",
                "num_sample": n,
                "task_instruction": ["Answer."],
            }
        recs.append(rec)
    return recs


def write_llava(tasks: list[TaskSpec], root: Path, n: int) -> None:
    """M4-Instruct (lmms-lab/M4-Instruct-Data): one ``m4_instruct_annotations.json`` list of ``{id, image, conversations,
    metadata: {dataset, split, num_sample, task_instruction}}``, image paths relative to the repo root (format as the
    llava_conversation loader's docstring records it: public readers of that file and DEMON's metadata card).
    Mantis-Instruct (TIGER-Lab/Mantis-Instruct): ``<config>/train-00000-of-00001.parquet`` rows ``{id, images: [{bytes,
    path}], conversation: [{role, content}], source}`` whose paths are relative to the unpacked ``train_images.zip``,
    i.e. ``<config>/train_images/`` (TIGER-AI-Lab/Mantis@f3a3192 data/upload_conv_dataset_to_hf.py: zip members
    ``relative_to(image_dir)``; data/mantis-instruct-hf-module.py: joined to ``<split>_images``).
    User-converted sources (FashionIQ, CIRR, IRFL, Bongard-*): the same LLaVA layout, file named by rule.annotation."""
    files: dict[Path, list[dict]] = defaultdict(list)
    mantis: dict[Path, list[dict]] = defaultdict(list)
    for t in tasks:
        base = root / root_name(t)
        if "config" in t.source.rule:
            folder = base / t.source.rule["config"]
            for r in _llava_records(t, n, "images"):
                for p in r["image"]:
                    png(folder / "train_images" / p, len(mantis[folder]))
                conv = [
                    {"role": "user" if c["from"] == "human" else "assistant", "content": c["value"]}
                    for c in r["conversations"]
                ]
                mantis[folder].append(
                    {
                        "id": r["id"],
                        "images": [{"bytes": None, "path": p} for p in r["image"]],
                        "conversation": conv,
                        "source": t.source.rule["config"],
                    }
                )
        else:
            prefix = t.source.rule.get("dataset", t.source.subset or "imgs")
            recs = _llava_records(t, n, prefix)
            for r in recs:
                for p in r["image"]:
                    png(base / p, len(files[base / t.source.rule["annotation"]]))
            files[base / t.source.rule["annotation"]].extend(recs)
    filtered = {root / root_name(t) / t.source.rule["annotation"] for t in tasks if "dataset" in t.source.rule}
    for path, recs in files.items():
        if path not in filtered:
            dump(path, recs)
            continue
        decoy = {
            "id": "decoy-0",
            "image": ["decoy/x.png"],
            "metadata": {"dataset": "SomethingElse"},
            "conversations": [{"from": "human", "value": "<image>\nIs it?"}, {"from": "gpt", "value": "Yes"}],
        }
        png(path.parent / "decoy/x.png")
        dump(path, recs + [decoy])
    for folder, rows in mantis.items():
        parquet(folder / "train-00000-of-00001.parquet", rows)


# ----------------------------------------------------------------------------- SEED-Bench-2
# The published name -> id map (AILab-CVC/SEED-Bench@991e849 DATASET.md, "question_type").
SEED2_TYPES = {
    "Scene Understanding": 1,
    "Instance Identity": 2,
    "Instance Attributes": 3,
    "Instance Location": 4,
    "Instances Counting": 5,
    "Spatial Relation": 6,
    "Instance Interaction": 7,
    "Visual Reasoning": 8,
    "Text Understanding": 9,
    "Celebrity Recognition": 10,
    "Landmark Recognition": 11,
    "Chart Understanding": 12,
    "Visual Referring Expression": 13,
    "Science Knowledge": 14,
    "Emotion Recognition": 15,
    "Visual Mathematics": 16,
    "Difference Spotting": 17,
    "Meme Comprehension": 18,
    "Global Video Understanding": 19,
    "Action Recognition": 20,
    "Action Prediction": 21,
    "Procedure Understanding": 22,
    "In-Context Captioning": 23,
    "Interleaved Image-Text Analysis": 24,
    "Text-to-Image Generation": 25,
    "Next Image Prediction": 26,
    "Text-Image Creation": 27,
}


def seed2_question(
    qtype: int, n: int, data_id: Any, source: str, data_type: str, answer: str = "A", **over: Any
) -> dict:
    """One question as DATASET.md documents it (question_id "<dimension>_<n>")."""
    subpart = {"Video": "Video & Text Comprehension"}.get(data_type, "Single-Image & Text Comprehension")
    return {
        "answer": answer,
        "choice_a": "One",
        "choice_b": "Two",
        "choice_c": "Three",
        "choice_d": "Four",
        "data_id": data_id,
        "data_source": source,
        "data_type": data_type,
        "level": "L1",
        "question": f"How many towels are in the image? ({n})",
        "question_id": f"{qtype}_{n}",
        "question_type_id": qtype,
        "subpart": subpart,
        "version": "v2" if source != "cc3m" else "v1",
        **over,
    }


def write_seed(tasks: list[TaskSpec], root: Path, n: int) -> None:
    """``SEED-Bench-2/SEED-Bench_v2_level1_2_3.json`` {questions, question_type}; images by ``data_source``: ``cc3m`` ->
    ``cc3m-image/<data_id>`` (file named exactly as data_id, no extension, as DATASET.md's example and eval.py's plain
    join have it), ``SEED-Bench v2`` -> ``SEED-Bench-2-image/<data_id>``; video questions list 8 frames
    (``task20/Charades_test_frame/<video>/1.png`` .. ``8.png``). Source: AILab-CVC/SEED-Bench@991e849 DATASET.md and
    SEED-Bench-2/eval.py."""
    base = root / root_name(tasks[0])
    qs = []
    for t in tasks:
        dims = t.source.rule["dimensions"]
        for i in range(n):
            tid = SEED2_TYPES[dims[i % len(dims)]]
            k = len(qs)
            if t.images == "multi":
                frames = [f"task{tid}/Charades_test_frame/V{k:04d}/{f}.png" for f in range(1, 9)]
                for f, name in enumerate(frames):
                    png(base / "SEED-Bench-2-image" / name, f)
                qs.append(seed2_question(tid, k, frames, "SEED-Bench v2", "Video", "ABCD"[i % 4]))
            elif tid <= 9:
                data_id = f"{1454426 + k}_{2591111986 + k}"
                png(base / "cc3m-image" / data_id, i)
                qs.append(seed2_question(tid, k, data_id, "cc3m", "Single Image", "ABCD"[i % 4]))
            else:
                data_id = f"task{tid}/image/{k}.jpg"
                png(base / "SEED-Bench-2-image" / data_id, i)
                # one question with an empty option, as the published file has some
                over = {"choice_d": ""} if i == 0 else {}
                qs.append(seed2_question(tid, k, data_id, "SEED-Bench v2", "Single Image", "ABC"[i % 3], **over))
    png(base / "cc3m-image" / "1_2")
    qs.append(seed2_question(1, 9999, "1_2", "cc3m", "Single Image"))  # Scene Understanding: no task reads it
    dump(base / tasks[0].source.rule["annotation"], {"questions": qs, "question_type": SEED2_TYPES})


# ----------------------------------------------------------------------------- IconQA
def write_iconqa(tasks: list[TaskSpec], root: Path, n: int) -> None:
    """``iconqa_data/problems.json`` {pid: {question, choices, answer, ques_type, grade, ...}}, ``pid_splits.json`` with
    ``<ques_type>_{train,val,test}`` and the derived ``_trainval``, ``_minitrain``, ``_minival``, ``_minitest`` lists,
    images ``iconqa/<split>/<ques_type>/<pid>/image.png``. Source: lupantech/IconQA@4b053f3 run_*/dataset.py
    (``pid_splits['%s_%s' % (task, name)]``, names train/val/test/trainval/minitrain/minival/minitest),
    tools/create_ans_label.py (``fill_in_blank_trainval``), tools/generate_img_patch_feature.py (image path).
    The grade values are not shown there (not confirmed)."""
    base = root / "iconqa_data"
    problems: dict[str, dict] = {}
    splits: dict[str, list[str]] = defaultdict(list)
    decoys = [("choose_txt", "prek"), ("fill_in_blank", "grade2"), ("choose_img", "kindergarten")]
    entries = [(t.source.rule["ques_type"], g, t.id) for t in tasks for g in t.source.rule["grades"]] + [
        (q, g, "decoy") for q, g in decoys
    ]
    for qtype, grade, tag in entries:
        for i in range(n if tag != "decoy" else 1):
            pid = f"{len(problems) + 1}"
            split = ("train", "val", "test")[i % 3]
            problems[pid] = {
                "question": f"How many shapes? ({tag} {i})",
                "choices": ["1", "2", "3"] if qtype != "fill_in_blank" else None,
                "answer": (i % 3) if qtype != "fill_in_blank" else str(i),
                "ques_type": qtype,
                "grade": grade,
                "label": "counting",
                "split": split,
            }
            splits[f"{qtype}_{split}"].append(pid)
            png(base / "iconqa" / split / qtype / pid / "image.png", i)
    for qtype in {q for q, _, _ in entries}:
        splits[f"{qtype}_trainval"] = splits[f"{qtype}_train"] + splits[f"{qtype}_val"]
        for s in ("train", "val", "test"):
            splits[f"{qtype}_mini{s}"] = splits[f"{qtype}_{s}"][:1]
    dump(base / "problems.json", problems)
    dump(base / "pid_splits.json", splits)


# ----------------------------------------------------------------------------- WorldCuisines
# Hub split -> hf_prompt folder (worldcuisines/vqa tree: hf_prompt/{train,small_eval,large_eval}_task{1,2}).
WC_FOLDERS = {"train": "train_task{k}", "test_small": "small_eval_task{k}", "test_large": "large_eval_task{k}"}
WC_INSTRUCTION = "Print only the answer with a single answer id (1,2,3,4,5)."
WC_DISHES = ["Kelp broth", "Bean stew", "Rice cake", "Fish pie", "Corn soup"]


def wc_row(qa_id: str, lang: str, prompt_type: str, task: int, i: int, folder: str) -> dict:
    """One ``hf_prompt`` row with the published fields (worldcuisines/worldcuisines@d4d1c44
    generate_vqa/generated_data/hf_prompt/small_eval_task1/en_small_eval_task1.jsonl); made-up dishes."""
    opts = WC_DISHES if task == 1 else ["Peru", "Chile", "Japan", "Italy", "Kenya"]
    answer = i % len(opts)
    stem = "What is this dish called?" if task == 1 else "Which country is this dish associated with?"
    prompt = stem + "\n" + "\n".join(f"{k + 1}. {o}" for k, o in enumerate(opts)) + "\n\n" + WC_INSTRUCTION
    return {
        "qa_id": qa_id,
        "lang": lang,
        "food_id": str(100 + i),
        "prompt_id": str(10 + int(prompt_type)),
        "prompt_type": prompt_type,
        "multi_choice_prompt": prompt,
        "open_ended_prompt": stem + "\n\nPrint only the answer.",
        "image_url": f"https://upload.wikimedia.org/wikipedia/commons/a/ab/Dish_{qa_id}_%C3%A9t%C3%A9.jpg?download",
        "answer": opts[answer],
        "multi_choice_answer": answer + 1,
        "task": folder,
        "lang_status": "full",
    }


def write_wcvqa(tasks: list[TaskSpec], root: Path, n: int, images: str = "food-kb") -> None:
    """``vqa/hf_prompt/<split folder>/<lang>_<split folder>.jsonl`` as the Hub dataset worldcuisines/vqa and the authors'
    repository (generate_vqa/generated_data/hf_prompt/) ship them; prompt types "1".."4" (generate_vqa/resources/
    query_ctx.csv); options numbered from 1 with the trailing instruction; images by ``image_url`` from the knowledge base
    ``food-kb/data/*.parquet`` (columns image1_url..image8_url, image1..image8 = {bytes, path}: the authors'
    evaluation/src/base_model.py::get_url_jpg_map), or with ``images="folder"`` as files ``vqa/images/<file name>``."""
    base = root / root_name(tasks[0])
    rows: dict[str, list[dict]] = defaultdict(list)
    for t in tasks:
        r = t.source.rule
        folder = WC_FOLDERS[r.get("split", "train")].format(k=r["task"])
        for i in range(n):
            rows[folder].append(wc_row(f"{t.id}-{i}", r["lang"], str(r["prompt_type"]), r["task"], i, folder))
    kb: list[dict] = []
    for folder, rs in rows.items():
        jsonl(base / "hf_prompt" / folder / f"en_{folder}.jsonl", rs)
        jsonl(
            base / "hf_prompt" / folder / f"fr_{folder}.jsonl", [{**rs[0], "lang": "fr", "qa_id": "fr-0"}]
        )  # other language
        for k, row in enumerate(rs):
            if images == "folder":
                png(base / "images" / url_file(row["image_url"]), k)
            else:
                kb.append(
                    {
                        "food_id": row["food_id"],
                        "Name": row["answer"],
                        **{
                            f"image{j}": ({"bytes": png_bytes(k), "path": None} if j == 1 else None)
                            for j in range(1, 9)
                        },
                        **{f"image{j}_url": (row["image_url"] if j == 1 else None) for j in range(1, 9)},
                    }
                )
    if kb:
        parquet(root / "food-kb" / "data" / "train-00000-of-00001.parquet", kb)


# ----------------------------------------------------------------------------- DVQA / VSR
def write_dvqa(tasks: list[TaskSpec], root: Path, n: int) -> None:
    """``DVQA/qa/<annotation>`` list of {image, question, answer, question_id, template_id}, images ``DVQA/images/``.
    Not confirmed: the DVQA release README was not found in the stored sources (field names as commonly read)."""
    for t in tasks:
        base = root / root_name(t)
        rows = []
        for i in range(n):
            png(base / "images" / f"bar_train_{i:08d}.png", i)
            rows.append(
                {
                    "image": f"bar_train_{i:08d}.png",
                    "question": f"What is the value of bar {i}?",
                    "answer": str(i),
                    "question_id": 1000 + i,
                    "template_id": "data",
                }
            )
        dump(base / "qa" / t.source.rule["annotation"], rows)


def write_vsr(tasks: list[TaskSpec], root: Path, n: int) -> None:
    """``vsr_random/{train,dev,test}.jsonl`` rows {image, image_link, caption, label, relation} (the cambridgeltl/vsr_random
    card and juletxara/visual-spatial-reasoning loading script); the COCO images in ``images/`` (folder not fixed by
    the publisher: not confirmed)."""
    for t in tasks:
        base = root / root_name(t)
        rows = []
        for i in range(n):
            png(base / "images" / f"{i:012d}.jpg", i)
            rows.append(
                {
                    "image": f"{i:012d}.jpg",
                    "image_link": "http://images.cocodataset.org/train2017/x.jpg",
                    "caption": f"The cat is under the table {i}.",
                    "label": i % 2,
                    "relation": "under",
                }
            )
        jsonl(base / "train.jsonl", rows)


# ----------------------------------------------------------------------------- HFLB sources
def _kw_text(rule: dict, i: int) -> str:
    if "categories" in rule:
        cat = rule["category"]
        if cat == rule["rest"]:
            return f"a happy moment here {'abcdefghij'[i % 10]}"
        return f"a {rule['categories'][cat][0]} scene here {'abcdefghij'[i % 10]}"
    if "keywords" in rule:
        return f"what is the person {rule['keywords'][i % len(rule['keywords'])]} in front of"
    return f"what is depicted in this painting {i}"


def gqa_question(image_id: str, question: str, answer: str, structural: str, semantic: str) -> dict:
    return {
        "imageId": image_id,
        "question": question,
        "answer": answer,
        "fullAnswer": f"It is {answer}.",
        "isBalanced": True,
        "groups": {"global": None, "local": None},
        "entailed": [],
        "equivalent": [],
        "semanticStr": "select: x",
        "semantic": [],
        "annotations": {"answer": {}, "question": {}, "fullAnswer": {}},
        "types": {"structural": structural, "semantic": semantic, "detailed": f"{semantic}Verify"},
    }


def write_gqa(tasks: list[TaskSpec], root: Path, n: int) -> None:
    """``GQA/questions1.2/{train,val}_balanced_questions.json`` = {qid: {imageId, question, answer, fullAnswer, isBalanced,
    types, ...}} beside the answer-less ``test_balanced_questions.json``, ``challenge_balanced_questions.json`` and
    ``submission_all_questions.json`` (questions1.2.zip as public loaders read it: ``GQA/questions1.2/...``, test and
    challenge without ``answer``); images ``GQA/images/<imageId>.jpg``."""
    base = root / "GQA"
    qs: dict[str, dict] = {}
    answers = ["red", "blue", "green", "table", "chair", "left"]
    for t in tasks:
        r = t.source.rule
        for i in range(n):
            qid = f"{len(qs) + 1:08d}"
            sem = r["semantic"][0]
            if "answers" in r:
                q, a, st = f"Is there a cup ({i})?", "yes" if i % 2 else "no", "verify"
            elif r.get("num_choices") == 2:
                q, a, st = "Is the cup red or blue?", ["red", "blue"][i % 2], "choose"
            else:
                q, a, st = f"What is on the table ({i})?", answers[i % len(answers)], "query"
            qs[qid] = gqa_question(f"n{qid}", q, a, st, sem)
            png(base / "images" / f"n{qid}.jpg", i)
    ids = sorted(qs)
    half = len(ids) // 2
    dump(base / "questions1.2" / "train_balanced_questions.json", {k: qs[k] for k in ids[:half]})
    dump(base / "questions1.2" / "val_balanced_questions.json", {k: qs[k] for k in ids[half:]})
    testq = {
        k: v
        for k, v in gqa_question("n9", "What is it?", "cup", "query", "obj").items()
        if k not in ("answer", "fullAnswer")
    }
    for name in ("test_balanced_questions.json", "challenge_balanced_questions.json", "submission_all_questions.json"):
        dump(base / "questions1.2" / name, {"t1": testq})


def write_vqa(tasks: list[TaskSpec], root: Path, n: int) -> None:
    """VQA API layout (GT-Vision-Lab/VQA@a013f00 README "Files" and PythonHelperTools/vqaDemo.py): ``VQA/Questions/
    OpenEnded_abstract_v002_train2015_questions.json``, ``VQA/Annotations/abstract_v002_train2015_annotations.json``,
    ``VQA/Images/abstract_v002/train2015/abstract_v002_train2015_<image_id:012d>.png`` (file names: not confirmed)."""
    base = root / "VQA"
    questions, anns = [], []
    for t in tasks:
        at = t.source.rule["answer_type"][0]
        for i in range(n):
            qid = len(questions) + 1
            img = qid * 10
            if at == "yes/no":
                q, a = "Is the girl happy?", "yes" if i % 2 else "no"
            elif at == "number":
                q, a = "How many trees are there?", str(i)
            elif "question_prefixes" in t.source.rule:
                q, a = "What color is the couch?", "red"
            else:
                q, a = "Who is sitting on the couch?", "girl"
            questions.append({"image_id": img, "question": q, "question_id": qid})
            anns.append(
                {
                    "question_id": qid,
                    "image_id": img,
                    "question_type": q.split()[0].lower(),
                    "answer_type": at,
                    "multiple_choice_answer": a,
                    "answers": [{"answer": a, "answer_confidence": "yes", "answer_id": 1}],
                }
            )
            png(base / "Images" / "abstract_v002" / "train2015" / f"abstract_v002_train2015_{img:012d}.png", i)
    dump(
        base / "Questions" / "OpenEnded_abstract_v002_train2015_questions.json",
        {"questions": questions, "task_type": "Open-Ended", "data_type": "abstract_v002", "data_subtype": "train2015"},
    )
    dump(
        base / "Annotations" / "abstract_v002_train2015_annotations.json",
        {"annotations": anns, "data_type": "abstract_v002"},
    )
    for sub in ("val2015",):  # the loader's default subtypes include val2015: an empty but well-formed subset
        dump(base / "Questions" / f"OpenEnded_abstract_v002_{sub}_questions.json", {"questions": []})
        dump(base / "Annotations" / f"abstract_v002_{sub}_annotations.json", {"annotations": []})
        (base / "Images" / "abstract_v002" / sub).mkdir(parents=True, exist_ok=True)


def snli_ve_row(fid: str, hyp: str, label: str, k: int, id_field: str = "Flickr30K_ID") -> dict:
    """A row as necla-ml/SNLI-VE@e6cf745 vet/tools/snli_ve_generator.py writes it: SNLI 1.0's fields, sorted, plus the
    image id without ``.jpg`` (``Flickr30K_ID``; files from the earlier generator name it ``Flikr30kID``)."""
    row = {
        "annotator_labels": [label],
        "captionID": f"{fid}.jpg#{k % 5}",
        "gold_label": label,
        "pairID": f"{fid}.jpg#{k % 5}r{k}{label[0]}",
        "sentence1": "Two people are outside.",
        "sentence1_binary_parse": "( ( Two people ) ( are outside ) )",
        "sentence1_parse": "(ROOT (S (NP (CD Two) (NNS people))))",
        "sentence2": hyp,
        "sentence2_binary_parse": "( x )",
        "sentence2_parse": "(ROOT (S x))",
        id_field: fid,
    }
    return dict(sorted(row.items()))


def write_snli_ve(tasks: list[TaskSpec], root: Path, n: int) -> None:
    """``SNLI-VE/data/snli_ve_train.jsonl`` (the generator's output path) and ``SNLI-VE/data/Flickr30K/flickr30k_images/
    <id>.jpg`` (data/download unpacks flickr30k_images.tar.gz there)."""
    base = root / "SNLI-VE" / "data"
    rows = []
    for t in tasks:
        for i in range(n):
            fid = str(1000000 + len(rows))
            png(base / "Flickr30K" / "flickr30k_images" / f"{fid}.jpg", i)
            rows.append(
                snli_ve_row(
                    fid, _kw_text(t.source.rule, i), ["entailment", "neutral", "contradiction"][i % 3], len(rows)
                )
            )
    jsonl(base / "snli_ve_train.jsonl", rows)


def write_coco_qa(tasks: list[TaskSpec], root: Path, n: int) -> None:
    """``COCO-QA/<split>/{questions,answers,img_ids,types}.txt`` and COCO 2014 images ``COCO-QA/images/`` (the release's
    four-file layout as commonly read: not confirmed)."""
    base = root / "COCO-QA" / "train"
    q, a, ids, ty = [], [], [], []
    for t in tasks:
        for i in range(n):
            img = 1000 + len(q)
            q.append(f"what is on the plate {i}")
            a.append("pizza")
            ids.append(str(img))
            ty.append(str(t.source.rule["types"][0]))
            png(root / "COCO-QA" / "images" / f"COCO_train2014_{img:012d}.jpg", i)
    for name, lines in (("questions.txt", q), ("answers.txt", a), ("img_ids.txt", ids), ("types.txt", ty)):
        (base / name).parent.mkdir(parents=True, exist_ok=True)
        (base / name).write_text("\n".join(lines) + "\n")


def write_nlvr2(tasks: list[TaskSpec], root: Path, n: int) -> None:
    """``NLVR2/data/train.json`` JSON lines {identifier, sentence, label "True"/"False", left_url, right_url, directory, ...}
    (lil-lab/nlvr@1892484 nlvr2/README.md, nlvr2/data/dev.json); images ``NLVR2/images/train/<split-set-pair>-img0.png``
    saved flat as nlvr2/util/download_images.py does."""
    base = root / "NLVR2"
    rows = []
    for t in tasks:
        for i in range(n):
            stem = f"train-{len(rows) + 10}-{i % 4}"
            for k in (0, 1):
                png(base / "images" / "train" / f"{stem}-img{k}.png", i + k)
            rows.append(
                {
                    "validation": {},
                    "sentence": _kw_text(t.source.rule, i),
                    "left_url": "http://x/l.jpg",
                    "writer": "61",
                    "label": "True" if i % 2 else "False",
                    "right_url": "http://x/r.jpg",
                    "synset": "cup",
                    "query": "cups1",
                    "identifier": f"{stem}-0",
                    "extra_validations": {},
                    "directory": str(len(rows) % 100),
                }
            )
    jsonl(base / "data" / "train.json", rows)


def vizwiz_row(image: str, question: str, answer: str = "soup") -> dict:
    return {
        "image": image,
        "question": question,
        "answerable": 1,
        "answer_type": "other",
        "answers": [{"answer": answer, "answer_confidence": "yes"}] * 7
        + [{"answer": "can", "answer_confidence": "maybe"}] * 3,
    }


def write_vizwiz(tasks: list[TaskSpec], root: Path, n: int) -> None:
    """``VizWiz/Annotations/{train,val,test}.json`` (Annotations.zip) lists of {image, question, answers: [{answer,
    answer_confidence}] x10, answer_type, answerable}, test without answers; images ``VizWiz/train/VizWiz_train_<8
    digits>.jpg`` (train.zip). Source: vizwiz.org VQA task page archives as public harnesses download them
    (VizWiz_final/vqa_data/Annotations.zip, VizWiz_final/images/train.zip), the VizWiz API demo (Annotations/%s.json)."""
    base = root / "VizWiz"
    rows = []
    for t in tasks:
        for i in range(n):
            img = f"VizWiz_train_{len(rows):08d}.jpg"
            png(base / "train" / img, i)
            rows.append(vizwiz_row(img, _kw_text(t.source.rule, i)))
    rows.append({**rows[0], "image": "VizWiz_train_99999999.jpg", "answerable": 0})
    dump(base / "Annotations" / "train.json", rows)
    dump(base / "Annotations" / "val.json", [])
    png(base / "val" / "VizWiz_val_00000000.jpg")
    dump(base / "Annotations" / "test.json", [{"image": "VizWiz_test_00000000.jpg", "question": "What is this?"}])


def write_aqua(tasks: list[TaskSpec], root: Path, n: int) -> None:
    """``AQUA/<split>.json`` lists of {image, question, answer, need_external_knowledge}, SemArt images ``AQUA/images/``
    (a public AQUA card lists these fields; the release README was not found: not confirmed)."""
    base = root / "AQUA"
    rows = []
    for t in tasks:
        for i in range(n):
            img = f"{len(rows):05d}-art.jpg"
            png(base / "images" / img, i)
            rows.append(
                {
                    "image": img,
                    "question": _kw_text(t.source.rule, i),
                    "answer": "a tree",
                    "need_external_knowledge": False,
                }
            )
    dump(base / "train.json", rows)


WRITERS = {
    "llava_conversation": write_llava,
    "seed_bench2": write_seed,
    "iconqa": write_iconqa,
    "worldcuisines": write_wcvqa,
    "dvqa": write_dvqa,
    "vsr": write_vsr,
    "gqa": write_gqa,
    "vqa_v2": write_vqa,
    "snli_ve": write_snli_ve,
    "coco_qa": write_coco_qa,
    "nlvr2": write_nlvr2,
    "vizwiz": write_vizwiz,
    "aqua": write_aqua,
}


def write_fixtures(spec: BenchmarkSpec, root: Path, per_task: int = 5) -> Path:
    """Write fixtures for every task of a multi-modal spec; returns ``root``."""
    by_loader: dict[str, list[TaskSpec]] = defaultdict(list)
    for t in spec.tasks:
        by_loader[t.source.loader].append(t)
    for loader, tasks in by_loader.items():
        WRITERS[loader](tasks, Path(root), per_task)
    return Path(root)
