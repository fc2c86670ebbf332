"""DRAKE: 40 training tasks over 10 clients (FedMosaic paper Table 37) plus 7 unseen tasks (its Sec. 5, App. A.27).

Task rows follow the paper's task descriptions (App. A.27) and client table (Table 37). The paper gives no per-task answer
types, image counts or source distributions; every such value is tagged [I] in the task's
``provenance`` and the general decisions are listed in the manifest's ``choices``.
"""

from __future__ import annotations

from typing import Any

from drake_bench.benchmarks.sample import AnswerType
from drake_bench.benchmarks.spec import (
    AsyncDefaults,
    BenchmarkSpec,
    Choice,
    ClientSpec,
    DirichletDefaults,
    ModelAllocation,
    ScenarioDefaults,
    SourceSpec,
    TaskSpec,
)
from drake_bench.benchmarks.definitions._common import COMMON_CHOICES, PAPER, SUBSAMPLING, SUBSAMPLING_CHOICES, fl, source_rule

MC, YN, OPEN = AnswerType.MULTIPLE_CHOICE, AnswerType.YES_NO, AnswerType.OPEN

M4 = "lmms-lab/M4-Instruct-Data"
M4_FILE = "m4_instruct_annotations.json"
MANTIS = "TIGER-Lab/Mantis-Instruct"
SEED2 = "AILab-CVC/SEED-Bench-2"
WCVQA = "worldcuisines/vqa"

VR, MR, VQA, UNSEEN = "visual-relation", "multimodal-reasoning", "vqa", "unseen"

CITE = {
    "demon": "Li et al. 2024, Fine-tuning Multimodal LLMs to Follow Zero-shot Demonstrative Instructions (DEMON); packaged in LLaVA-NeXT-Interleave M4-Instruct (Li et al. 2024)",
    "m4": "Li et al. 2024, LLaVA-NeXT-Interleave: Tackling Multi-image, Video, and 3D in Large Multimodal Models (M4-Instruct)",
    "mantis": "Jiang et al. 2024, MANTIS: Interleaved Multi-Image Instruction Tuning (Mantis-Instruct)",
    "seed2": "Li et al. 2023, SEED-Bench-2: Benchmarking Multimodal Large Language Models",
    "iconqa": "Lu et al. 2021, IconQA: A New Benchmark for Abstract Diagram Understanding and Visual Language Reasoning",
    "wcvqa": "Winata et al. 2024, WorldCuisines: A Massive-Scale Benchmark for Multilingual and Multicultural VQA on Global Cuisines",
    "coinstruct": "Wu et al. 2024, Towards Open-ended Visual Quality Comparison (Co-Instruct)",
    "dvqa": "Kafle et al. 2018, DVQA: Understanding Data Visualizations via Question Answering",
    "vsr": "Liu et al. 2023, Visual Spatial Reasoning",
    "user": "original dataset converted by the user to LLaVA conversation JSON (the paper does not say which distribution it used)",
}


def _m4(dataset: str, **extra: Any) -> dict[str, Any]:
    return {"annotation": M4_FILE, "dataset": dataset, **extra}


# What to download from where, per source (shown by `drake-bench sources check`; docs/data-sources.md has the layouts).
_M4_DL = [["M4-Instruct annotations and image zips (unpack the zips beside m4_instruct_annotations.json)", "https://huggingface.co/datasets/lmms-lab/M4-Instruct-Data"]]
DOWNLOADS: dict[str, Any] = {
    "demon": _M4_DL, "m4": _M4_DL, "coinstruct": _M4_DL,
    "mantis": [["<config>/<split>-*.parquet (revision main) and <config>/<split>_images*.zip (revision script), each zip unpacked into <config>/<split>_images/",
                "https://huggingface.co/datasets/TIGER-Lab/Mantis-Instruct"]],
    "SEED-Bench-2": [["SEED-Bench_v2_level1_2_3.json, cc3m-image.zip (-> cc3m-image/) and SEED-Bench-2-image.zip.001.. (-> SEED-Bench-2-image/)",
                      "https://huggingface.co/datasets/AILab-CVC/SEED-Bench-2"]],
    "IconQA": [["iconqa_data.zip (unpacks to iconqa_data/)", "https://iconqa2021.s3.us-west-1.amazonaws.com/iconqa_data.zip"]],
    "WorldCuisines": [["hf_prompt/ (the VQA rows)", "https://huggingface.co/datasets/worldcuisines/vqa"],
                      ["data/*.parquet (the images, by image_url) into food-kb/", "https://huggingface.co/datasets/worldcuisines/food-kb"]],
    "DVQA": [["qa/*.json and images/", "https://github.com/kushalkafle/DVQA_dataset"]],
    "VSR": [["train.jsonl, dev.jsonl, test.jsonl", "https://huggingface.co/datasets/cambridgeltl/vsr_random"],
            ["COCO 2017 images into images/", "https://github.com/cambridgeltl/visual-spatial-reasoning"]],
    "user": {
        "FashionIQ": [["the original release, converted to LLaVA conversation JSON (fashioniq.json)", "https://github.com/XiaoxiaoGuo/fashion-iq"]],
        "CIRR": [["the original release, converted to LLaVA conversation JSON (cirr.json)", "https://github.com/Cuberick-Orion/CIRR"]],
        "IRFL": [["the original release, converted to LLaVA conversation JSON (irfl_*.json)", "https://huggingface.co/datasets/lampent/IRFL"]],
        "Bongard-HOI": [["the original release, converted to LLaVA conversation JSON (bongard_hoi_*.json)", "https://github.com/NVlabs/Bongard-HOI"]],
        "Bongard-OpenWorld": [["the original release, converted to LLaVA conversation JSON (bongard_openworld_*.json)",
                               "https://github.com/joyjayng/Bongard-OpenWorld"]],
    },
}
# Pool sizes the publishers' releases give (a task far below one fails its build; docs/data-sources.md):
# SEED-Bench-2 question counts per dimension from the authors' evaluate_result/SEED-Bench-2/GPT-4V.json (question ids
# "<dimension>_<n>": dim 14 277; dims 2, 3, 4, 5, 7: 1831, 4650, 979, 2451, 97; dims 20-22: 1509, 1225, 1023);
# WorldCuisines train: 1,800 dishes x 5 prompts of each type per language (generate_vqa/sampling.py docstring);
# DVQA train_qa.json holds 2,325,316 questions (DVQA paper).
EXPECTED_ITEMS: dict[str, int] = {
    "seedbench2-kgqa": 277, "seedbench2-instanceqa": 10008, "seedbench2-temporalqa": 3757,
    "wcvqa-dishname": 9000, "wcvqa-contextdishname": 9000, "wcvqa-advcontextdishname": 9000, "wcvqa-location": 9000,
    "dvqa": 11000,
}

# (id, name, group, split, dataset, variant, loader, hub_repo, subset, rule, images, (min,max), answer, license, redistributable, cite, provenance)
_ROWS: list[tuple] = [
    # ---- client 1 (visual relation) ----
    ("fashion200k-clothcombination", "Fashion200K: ClothCombination", VR, "fashion-relation", "Fashion200K", "ClothCombination",
     "llava_conversation", M4, "Fashion200K", _m4("Fashion200K", question_contains="combin"), "multi", (2, 6), MC, "unknown", False, "demon",
     {"source.variant": "I", "answer_type": "I", "num_images": "I", "source.rule": "I"}),
    ("fashioniq", "FashionIQ (relative caption)", VR, "fashion-relation", "FashionIQ", None,
     "llava_conversation", None, "FashionIQ", {"annotation": "fashioniq.json"}, "multi", (2, 2), OPEN, "unknown", False, "user",
     {"answer_type": "I", "source.loader": "R", "source.rule": "R"}),
    ("vision-2img", "VISION: 2_Img", VR, "dual-image relation", "VISION", "2_Img",
     "llava_conversation", M4, "VISION", _m4("VISION", num_images=2), "multi", (2, 2), YN, "unknown", False, "demon",
     {"source.rule": "I"}),
    ("magicbrush", "MagicBrush (edit instruction)", VR, "dual-image relation", "MagicBrush", None,
     "llava_conversation", M4, "MagicBrush", _m4("MagicBrush"), "multi", (2, 2), OPEN, "unknown", False, "m4",
     {"answer_type": "I", "source.rule": "I"}),
    # ---- client 2 (VQA) ----
    ("coinstruct-2imgcompare", "Co-Instruct: 2_ImgCompare", VQA, "image quality", "Co-Instruct", "2_ImgCompare",
     "llava_conversation", M4, "coinstruct", _m4("coinstruct", num_images=2), "multi", (2, 2), MC, "unknown", False, "coinstruct",
     {"answer_type": "I", "source.rule": "I"}),
    ("seedbench2-kgqa", "SEED-Bench-2: KGQA", VQA, "general VQA", "SEED-Bench-2", "KGQA",
     "seed_bench2", SEED2, None, {"annotation": "SEED-Bench_v2_level1_2_3.json", "dimensions": ["Science Knowledge"]}, "single", (1, 1), MC, "cc-by-nc-4.0", False, "seed2",
     {"source.rule": "I"}),
    ("iconqa-shortanswer-easy", "IconQA: ShortAnswerEasy", VQA, "icon-domain", "IconQA", "ShortAnswerEasy",
     "iconqa", None, None, {"ques_type": "fill_in_blank", "grades": ["kindergarten"]}, "single", (1, 1), OPEN, "cc-by-nc-sa-4.0", False, "iconqa",
     {"source.rule": "R"}),
    ("wcvqa-dishname", "WCVQA: DishName", VQA, "cuisine-domain", "WorldCuisines", "DishName",
     "worldcuisines", WCVQA, "hf_prompt", {"task": 1, "prompt_type": "1", "lang": "en", "split": "train"}, "single", (1, 1), MC, "cc-by-sa-4.0", True, "wcvqa",
     {"answer_type": "I", "source.rule": "I"}),
    # ---- client 3 (VQA) ----
    ("coinstruct-howwhat", "Co-Instruct: HowWhat", VQA, "image quality", "Co-Instruct", "HowWhat",
     "llava_conversation", M4, "coinstruct", _m4("coinstruct", num_images=1, question_type="how_what"), "single", (1, 1), MC, "unknown", False, "coinstruct",
     {"answer_type": "I", "source.rule": "I"}),
    ("dvqa", "DVQA", VQA, "general VQA", "DVQA", None,
     "dvqa", None, None, {"annotation": "train_qa.json", "image_dir": "images"}, "single", (1, 1), OPEN, "cc-by-nc-4.0", False, "dvqa",
     {"answer_type": "I"}),
    ("iconqa-shortanswer-hard", "IconQA: ShortAnswerHard", VQA, "icon-domain", "IconQA", "ShortAnswerHard",
     "iconqa", None, None, {"ques_type": "fill_in_blank", "grades": ["grade1"]}, "single", (1, 1), OPEN, "cc-by-nc-sa-4.0", False, "iconqa",
     {"source.rule": "R"}),
    ("wcvqa-contextdishname", "WCVQA: ContextDishName", VQA, "cuisine-domain", "WorldCuisines", "ContextDishName",
     "worldcuisines", WCVQA, "hf_prompt", {"task": 1, "prompt_type": "3", "lang": "en", "split": "train"}, "single", (1, 1), MC, "cc-by-sa-4.0", True, "wcvqa",
     {"answer_type": "I", "source.rule": "I"}),
    # ---- client 4 (VQA) ----
    ("coinstruct-3imgcompare", "Co-Instruct: 3_ImgCompare", VQA, "image quality", "Co-Instruct", "3_ImgCompare",
     "llava_conversation", M4, "coinstruct", _m4("coinstruct", num_images=3), "multi", (3, 3), MC, "unknown", False, "coinstruct",
     {"answer_type": "I", "source.rule": "I"}),
    ("seedbench2-instanceqa", "SEED-Bench-2: InstanceQA", VQA, "general VQA", "SEED-Bench-2", "InstanceQA",
     "seed_bench2", SEED2, None, {"annotation": "SEED-Bench_v2_level1_2_3.json",
     "dimensions": ["Instance Identity", "Instance Attributes", "Instance Location", "Instances Counting", "Instance Interaction"]},
     "single", (1, 1), MC, "cc-by-nc-4.0", False, "seed2", {"source.rule": "I"}),
    ("iconqa-multichoice-easy", "IconQA: MultiChoiceEasy", VQA, "icon-domain", "IconQA", "MultiChoiceEasy",
     "iconqa", None, None, {"ques_type": "choose_txt", "grades": ["kindergarten"]}, "single", (1, 1), MC, "cc-by-nc-sa-4.0", False, "iconqa",
     {"source.rule": "R"}),
    ("wcvqa-advcontextdishname", "WCVQA: AdvContextDishName", VQA, "cuisine-domain", "WorldCuisines", "AdvContextDishName",
     "worldcuisines", WCVQA, "hf_prompt", {"task": 1, "prompt_type": "4", "lang": "en", "split": "train"}, "single", (1, 1), MC, "cc-by-sa-4.0", True, "wcvqa",
     {"answer_type": "I", "source.rule": "I"}),
    # ---- client 5 (visual relation) ----
    ("fashion200k-colorconsistency", "Fashion200K: ColorConsistency", VR, "fashion-relation", "Fashion200K", "ColorConsistency",
     "llava_conversation", M4, "Fashion200K", _m4("Fashion200K", question_contains="colo"), "multi", (4, 4), YN, "unknown", False, "demon",
     {"source.variant": "I", "num_images": "I", "source.rule": "I"}),
    ("nlvr2-subset1", "NLVR2: Subset1", VR, "dual-image relation", "NLVR2", "Subset1",
     "llava_conversation", M4, "nlvr2", _m4("nlvr2", half=0), "multi", (2, 2), YN, "cc-by-4.0", True, "m4",
     {"source.rule": "R"}),
    ("vision-4img", "VISION: 4_Img", VR, "dual-image relation", "VISION", "4_Img",
     "llava_conversation", M4, "VISION", _m4("VISION", num_images=4), "multi", (4, 4), YN, "unknown", False, "demon",
     {"source.rule": "I"}),
    ("vsr", "VSR", VR, "spatial/temporal", "VSR", "random split",
     "vsr", "cambridgeltl/vsr_random", None, {"files": ["train.jsonl", "dev.jsonl", "test.jsonl"], "image_dir": "images"}, "single", (1, 1), YN, "cc-by-4.0", True, "vsr",
     {"source.variant": "R"}),
    # ---- client 6 (visual relation) ----
    ("fashion200k-styleconsistency", "Fashion200K: StyleConsistency", VR, "fashion-relation", "Fashion200K", "StyleConsistency",
     "llava_conversation", M4, "Fashion200K", _m4("Fashion200K", question_contains="style"), "multi", (2, 3), YN, "unknown", False, "demon",
     {"source.variant": "I", "num_images": "I", "source.rule": "I"}),
    ("nlvr2-subset2", "NLVR2: Subset2", VR, "dual-image relation", "NLVR2", "Subset2",
     "llava_conversation", M4, "nlvr2", _m4("nlvr2", half=1), "multi", (2, 2), YN, "cc-by-4.0", True, "m4",
     {"source.rule": "R"}),
    ("cirr", "CIRR", VR, "dual-image relation", "CIRR", None,
     "llava_conversation", None, "CIRR", {"annotation": "cirr.json"}, "multi", (2, 8), MC, "unknown", False, "user",
     {"answer_type": "I", "source.loader": "R", "source.rule": "R"}),
    ("seedbench2-temporalqa", "SEED-Bench-2: TemporalQA", VR, "spatial/temporal", "SEED-Bench-2", "TemporalQA",
     "seed_bench2", SEED2, None, {"annotation": "SEED-Bench_v2_level1_2_3.json",
     "dimensions": ["Action Recognition", "Action Prediction", "Procedure Understanding"], "max_frames": 8},
     "multi", (1, 8), MC, "cc-by-nc-4.0", False, "seed2", {"source.rule": "I", "num_images": "R"}),
    # ---- client 7 (reasoning) ----
    ("irfl-metaphorsimilematching", "IRFL: MetaphorSimileMatching", MR, "visual figurative understanding", "IRFL", "MetaphorSimileMatching",
     "llava_conversation", None, "IRFL", {"annotation": "irfl_metaphor_simile_matching.json"}, "multi", (2, 6), MC, "cc-by-4.0", False, "user",
     {"answer_type": "I", "source.loader": "R"}),
    ("bongardhoi-actiondetection", "Bongard-HOI: ActionDetection", MR, "context-dependent visual reasoning", "Bongard-HOI", "ActionDetection",
     "llava_conversation", None, "Bongard-HOI", {"annotation": "bongard_hoi_action_detection.json"}, "multi", (2, 14), YN, "unknown", False, "user",
     {"answer_type": "I", "source.loader": "R"}),
    ("vizwiz-demon", "VizWiz (DEMON)", MR, "multi-image-text understanding", "VizWiz", "DEMON",
     "llava_conversation", M4, "VizWiz", _m4("VizWiz"), "multi", (2, 8), MC, "cc-by-4.0", False, "demon",
     {"answer_type": "I", "source.rule": "I"}),
    ("mitstates", "MIT-States (StateCoherence)", MR, "multi-image-text understanding", "MIT-States", "StateCoherence",
     "llava_conversation", M4, "MIT-States_StateCoherence", _m4("MIT-States_StateCoherence"), "multi", (4, 4), YN, "unknown", False, "demon",
     {"source.variant": "R"}),
    # ---- client 8 (reasoning) ----
    ("irfl-figurativeverification", "IRFL: FigurativeVerification", MR, "visual figurative understanding", "IRFL", "FigurativeVerification",
     "llava_conversation", None, "IRFL", {"annotation": "irfl_figurative_verification.json"}, "multi", (1, 4), YN, "cc-by-4.0", False, "user",
     {"answer_type": "I", "images": "I", "source.loader": "R"}),
    ("irfl-idiommatching", "IRFL: IdiomMatching", MR, "visual figurative understanding", "IRFL", "IdiomMatching",
     "llava_conversation", None, "IRFL", {"annotation": "irfl_idiom_matching.json"}, "multi", (2, 6), MC, "cc-by-4.0", False, "user",
     {"answer_type": "I", "source.loader": "R"}),
    ("bongardopenworld-conceptdetection", "Bongard-OpenWorld: ConceptDetection", MR, "context-dependent visual reasoning", "Bongard-OpenWorld", "ConceptDetection",
     "llava_conversation", None, "Bongard-OpenWorld", {"annotation": "bongard_openworld_concept_detection.json"}, "multi", (2, 14), YN, "cc-by-4.0", False, "user",
     {"answer_type": "I", "source.loader": "R"}),
    ("comics-dialogue", "COMICS: Dialogue", MR, "multi-image-text understanding", "COMICS", "Dialogue",
     "llava_conversation", M4, "COMICS_Dialogue", _m4("COMICS_Dialogue"), "multi", (2, 8), MC, "unknown", False, "demon",
     {"source.rule": "I"}),
    # ---- client 9 (reasoning) ----
    ("irfl-phraseselection", "IRFL: PhraseSelection", MR, "visual figurative understanding", "IRFL", "PhraseSelection",
     "llava_conversation", None, "IRFL", {"annotation": "irfl_phrase_selection.json"}, "single", (1, 1), MC, "cc-by-4.0", False, "user",
     {"answer_type": "I", "source.loader": "R"}),
    ("bongardopenworld-conceptquery", "Bongard-OpenWorld: ConceptQuery", MR, "context-dependent visual reasoning", "Bongard-OpenWorld", "ConceptQuery",
     "llava_conversation", None, "Bongard-OpenWorld", {"annotation": "bongard_openworld_concept_query.json"}, "multi", (2, 14), OPEN, "cc-by-4.0", False, "user",
     {"answer_type": "I", "source.loader": "R"}),
    ("bongardhoi-conceptquery", "Bongard-HOI: ConceptQuery", MR, "context-dependent visual reasoning", "Bongard-HOI", "ConceptQuery",
     "llava_conversation", None, "Bongard-HOI", {"annotation": "bongard_hoi_concept_query.json"}, "multi", (2, 14), OPEN, "unknown", False, "user",
     {"answer_type": "I", "source.loader": "R"}),
    ("bongardhoi-actionincoherence", "Bongard-HOI: ActionIncoherence", MR, "context-dependent visual reasoning", "Bongard-HOI", "ActionIncoherence",
     "llava_conversation", None, "Bongard-HOI", {"annotation": "bongard_hoi_action_incoherence.json"}, "multi", (2, 14), MC, "unknown", False, "user",
     {"answer_type": "I", "source.loader": "R"}),
    # ---- client 10 (VQA) ----
    ("coinstruct-yesno", "Co-Instruct: YesNo", VQA, "image quality", "Co-Instruct", "YesNO",
     "llava_conversation", M4, "coinstruct", _m4("coinstruct", num_images=1, question_type="yes_no"), "single", (1, 1), YN, "unknown", False, "coinstruct",
     {"source.rule": "I"}),
    ("tqa", "TQA (textbook QA)", VQA, "general VQA", "TQA", None,
     "llava_conversation", M4, "TQA", _m4("TQA"), "single", (1, 1), MC, "cc-by-nc-3.0", False, "m4",
     {"source.rule": "I"}),
    ("iconqa-multichoice-hard", "IconQA: MultiChoiceHard", VQA, "icon-domain", "IconQA", "MultiChoiceHard",
     "iconqa", None, None, {"ques_type": "choose_txt", "grades": ["grade1"]}, "single", (1, 1), MC, "cc-by-nc-sa-4.0", False, "iconqa",
     {"source.rule": "R"}),
    ("wcvqa-location", "WCVQA: Location", VQA, "cuisine-domain", "WorldCuisines", "Location",
     "worldcuisines", WCVQA, "hf_prompt", {"task": 2, "prompt_type": "2", "lang": "en", "split": "train"}, "single", (1, 1), MC, "cc-by-sa-4.0", True, "wcvqa",
     {"answer_type": "I", "source.rule": "I"}),
    # ---- unseen tasks (fast adaptation only) ----
    ("dreamsim", "DreamSim (Mantis-Instruct)", UNSEEN, "novel task type", "DreamSim", None,
     "llava_conversation", MANTIS, "dreamsim", {"config": "dreamsim"}, "multi", (3, 3), MC, "apache-2.0", True, "mantis",
     {"answer_type": "I", "images": "I"}),
    ("imagecode", "Image-CoDe (Mantis-Instruct)", UNSEEN, "novel task type", "Image-CoDe", None,
     "llava_conversation", MANTIS, "imagecode", {"config": "imagecode"}, "multi", (2, 10), MC, "apache-2.0", True, "mantis",
     {"answer_type": "I"}),
    ("recipeqa-imagecoherence", "RecipeQA: ImageCoherence (DEMON)", UNSEEN, "novel visual domain", "RecipeQA", "ImageCoherence",
     "llava_conversation", M4, "RecipeQA_ImageCoherence", _m4("RecipeQA_ImageCoherence"), "multi", (2, 8), MC, "unknown", False, "demon",
     {"source.variant": "I", "answer_type": "I"}),
    ("recipeqa-visualcloze", "RecipeQA: VisualCloze (DEMON)", UNSEEN, "novel visual domain", "RecipeQA", "VisualCloze",
     "llava_conversation", M4, "RecipeQA_VisualCloze", _m4("RecipeQA_VisualCloze"), "multi", (2, 8), MC, "unknown", False, "demon",
     {"source.variant": "I", "answer_type": "I"}),
    ("hqedit", "HQ-Edit (edit instruction)", UNSEEN, "novel visual domain", "HQ-Edit", None,
     "llava_conversation", M4, "HQ-Edit", _m4("HQ-Edit"), "multi", (2, 2), OPEN, "unknown", False, "m4",
     {"answer_type": "I", "source.rule": "I"}),
    ("contrastcaption-seen", "Mantis Contrast-Caption (LLaVA-domain images)", UNSEEN, "novel task type", "Contrast-Caption", "seen-domain",
     "llava_conversation", MANTIS, "contrastive_caption", {"config": "contrastive_caption", "half": 0}, "multi", (2, 8), MC, "apache-2.0", True, "mantis",
     {"split": "R", "source.rule": "R", "answer_type": "I"}),
    ("contrastcaption-unseen", "Mantis Contrast-Caption (unseen images)", UNSEEN, "novel visual domain", "Contrast-Caption", "unseen-domain",
     "llava_conversation", MANTIS, "contrastive_caption", {"config": "contrastive_caption", "half": 1}, "multi", (2, 8), MC, "apache-2.0", True, "mantis",
     {"split": "R", "source.rule": "R", "answer_type": "I"}),
]

# FedMosaic paper Table 37, in listed (Dynamic) order [P].
TABLE_37: dict[int, list[str]] = {
    1: ["fashion200k-clothcombination", "fashioniq", "vision-2img", "magicbrush"],
    2: ["coinstruct-2imgcompare", "seedbench2-kgqa", "iconqa-shortanswer-easy", "wcvqa-dishname"],
    3: ["coinstruct-howwhat", "dvqa", "iconqa-shortanswer-hard", "wcvqa-contextdishname"],
    4: ["coinstruct-3imgcompare", "seedbench2-instanceqa", "iconqa-multichoice-easy", "wcvqa-advcontextdishname"],
    5: ["fashion200k-colorconsistency", "nlvr2-subset1", "vision-4img", "vsr"],
    6: ["fashion200k-styleconsistency", "nlvr2-subset2", "cirr", "seedbench2-temporalqa"],
    7: ["irfl-metaphorsimilematching", "bongardhoi-actiondetection", "vizwiz-demon", "mitstates"],
    8: ["irfl-figurativeverification", "irfl-idiommatching", "bongardopenworld-conceptdetection", "comics-dialogue"],
    9: ["irfl-phraseselection", "bongardopenworld-conceptquery", "bongardhoi-conceptquery", "bongardhoi-actionincoherence"],
    10: ["coinstruct-yesno", "tqa", "iconqa-multichoice-hard", "wcvqa-location"],
}
CLIENT_GROUP = {1: VR, 5: VR, 6: VR, 7: MR, 8: MR, 9: MR, 2: VQA, 3: VQA, 4: VQA, 10: VQA}
UNSEEN_TASKS = ["dreamsim", "imagecode", "recipeqa-imagecoherence", "recipeqa-visualcloze", "hqedit",
                "contrastcaption-seen", "contrastcaption-unseen"]
DIRICHLET_TASKS = ["magicbrush", "vsr", "nlvr2-subset1", "irfl-metaphorsimilematching", "irfl-idiommatching",
                   "bongardhoi-actiondetection", "bongardopenworld-conceptdetection", "iconqa-multichoice-easy",
                   "iconqa-shortanswer-easy", "coinstruct-yesno"]


def _task(row: tuple) -> TaskSpec:
    (tid, name, group, split, dataset, variant, loader, hub, subset, rule, images, nimg, ans, lic, redis, cite, prov) = row
    metric = "token_accuracy" if ans == OPEN else "accuracy"
    return TaskSpec(
        id=tid, name=name, group=group, split=split,
        source=SourceSpec(dataset=dataset, variant=variant, loader=loader, hub_repo=hub, subset=subset,
                          rule=source_rule(rule, DOWNLOADS["user"][dataset] if cite == "user" else DOWNLOADS.get(cite) or DOWNLOADS[dataset],
                                           EXPECTED_ITEMS.get(tid)),
                          license=lic, redistributable=redis, citation=CITE[cite]),
        images=images, num_images=nimg, answer_type=ans, metric=metric,
        description=f"{name}; {'unseen sub-group' if group == UNSEEN else 'group'} {group}, split {split}.",
        provenance={"group": "P", "split": "P" if "split" not in prov else prov["split"], "client_order": "P",
                    "images": prov.get("images", "I"), "num_images": prov.get("num_images", "I"),
                    "answer_type": prov.get("answer_type", "I"), **{k: v for k, v in prov.items() if k != "split"},
                    "source.loader": prov.get("source.loader", "I")},
    )


def _alloc(desc: str, source: str, by_client: dict[int, str]) -> ModelAllocation:
    return ModelAllocation(description=desc, source=source, clients={str(c): m for c, m in sorted(by_client.items())})


def _allocations() -> dict[str, ModelAllocation]:
    L1, L3, L8 = "llava-llama3.2-1b", "llava-llama3.2-3b", "llava-llama3.1-8b"
    Q05, Q15, Q3 = "llava-qwen2.5-0.5b", "llava-qwen2.5-1.5b", "llava-qwen2.5-3b"
    rng = range(1, 11)
    return {
        "default": _alloc("[P] clients 1-4 LLaVA-Llama3.2-1B, 5-10 LLaVA-Llama3.2-3B (FedMosaic paper Table 8 rule); Tab. 2, 3, 7, Dirichlet and all other analyses",
                          "FedMosaic paper Tables 5, 8 and 14 (Tab. 2/3/7 rows, 'All other analysis/ablation')", {c: L1 if c <= 4 else L3 for c in rng}),
        "tab4-llama-qwen": _alloc("[P counts, R placement] 3 LLaVA-Llama3.2-3B + 4 LLaVA-Qwen2.5-1.5B + 3 LLaVA-Qwen2.5-3B; small-gain clients 1-4 get the 1.5B",
                                  "FedMosaic paper Table 14, Tab. 4 row", {**{c: Q15 for c in (1, 2, 3, 4)}, **{c: L3 for c in (5, 6, 7)}, **{c: Q3 for c in (8, 9, 10)}}),
        "tab16-1b-3b-8b": _alloc("[P counts, R placement] 3x1B, 5x3B, 2x8B; the 8B go to clients 7 and 8 (largest 1B->3B gains in FedMosaic paper Table 8)",
                                 "FedMosaic paper Table 14, Tab. 16 row", {**{c: L1 for c in (1, 2, 3)}, **{c: L3 for c in (4, 5, 6, 9, 10)}, **{c: L8 for c in (7, 8)}}),
        "tab17-homo-llama3b": _alloc("[P] all clients LLaVA-Llama3.2-3B", "FedMosaic paper Table 14, Tab. 17 DRAKE-Homo row", {c: L3 for c in rng}),
        "tab18-homo-qwen3b": _alloc("[P] all clients LLaVA-Qwen2.5-3B", "FedMosaic paper Table 14, Tab. 18 DRAKE-Homo row", {c: Q3 for c in rng}),
        "tab18-hetero-qwen": _alloc("[P counts, R placement] 3x Qwen2.5-0.5B (clients 1-3), 2x Qwen2.5-1.5B (clients 4, 10: smallest known gains), 5x Qwen2.5-3B",
                                    "FedMosaic paper Table 14, Tab. 18 DRAKE-Hetero row", {**{c: Q05 for c in (1, 2, 3)}, **{c: Q15 for c in (4, 10)}, **{c: Q3 for c in (5, 6, 7, 8, 9)}}),
        "tab19-llama3b-qwen1.5b": _alloc("[P counts, R placement] 6x LLaVA-Llama3.2-3B (clients 5-10), 4x LLaVA-Qwen2.5-1.5B (clients 1-4)",
                                         "FedMosaic paper Table 14, Tab. 19 first row", {c: Q15 if c <= 4 else L3 for c in rng}),
        "tab19-llama1b-3b-qwen1.5b": _alloc("[P counts, R placement] 2x LLaVA-Llama3.2-1B (clients 1-2), 3x LLaVA-Qwen2.5-1.5B (clients 3, 4, 10), 5x LLaVA-Llama3.2-3B (clients 5-9)",
                                            "FedMosaic paper Table 14, Tab. 19 second row", {**{c: L1 for c in (1, 2)}, **{c: Q15 for c in (3, 4, 10)}, **{c: L3 for c in (5, 6, 7, 8, 9)}}),
    }


CHOICES = [
    Choice(key="tasks.sources", tag="I", decision="DEMON, Co-Instruct, NLVR2, TQA, MagicBrush, HQ-Edit tasks are read from LLaVA-NeXT-Interleave's M4-Instruct annotations (filtered by metadata.dataset); DreamSim, Image-CoDe and Contrast-Caption from Mantis-Instruct",
           reason="the paper does not name its copies; a public folder list of M4-Instruct holds exactly these dataset names, and Mantis-Instruct the other three (docs/design-notes.md#drake-sources)"),
    Choice(key="tasks.user_converted", tag="R", decision="FashionIQ, CIRR, IRFL, Bongard-HOI and Bongard-OpenWorld are read from LLaVA-format conversation JSON that the user prepares from the original datasets (one file per task, named in source.rule.annotation)",
           reason="the paper does not say which distribution of these datasets it used and they are not in M4-Instruct's folder list"),
    Choice(key="tasks.answer_types", tag="I", decision="per-task answer types (MC / YN / OPEN) are inferred from each source's question format (DEMON sources: their question_type metadata); where MC or OPEN both fit, MC; where YN or MC both fit, YN",
           reason="the paper gives no per-task answer types; closed types are scored exactly (docs/design-notes.md#answer-types)"),
    Choice(key="tasks.nlvr2-subsets", tag="R", decision="NLVR2 Subset1/Subset2 are two disjoint seeded halves of M4-Instruct's nlvr2 pool (rule.half)",
           reason="the paper does not describe the split; disjoint seeded halves are the simplest reproducible one (docs/design-notes.md#drake-partitions)"),
    Choice(key="tasks.mitstates", tag="R", decision="MIT-States uses DEMON's StateCoherence subset", reason="DEMON has two MIT-States subsets (StateCoherence, PropertyCoherence) and the paper does not say which it used; one is fixed so every build has the same task"),
    Choice(key="tasks.fashion200k", tag="I", decision="Fashion200K variants are selected from DEMON's Fashion200K items by instruction keyword (combin / colo / style)",
           reason="the variant names are the paper's; DEMON ships one Fashion200K subset"),
    Choice(key="tasks.iconqa-levels", tag="R", decision="IconQA Easy = grade 'kindergarten', Hard = grade 'grade1'; ShortAnswer = ques_type fill_in_blank, MultiChoice = choose_txt",
           reason="FedMosaic paper App. A.27 splits IconQA by kindergarten- and grade-1-level questions without saying which is Easy; the lower grade is taken as Easy"),
    Choice(key="tasks.coinstruct", tag="I", decision="Co-Instruct split by question type: YesNo = single-image items answered yes/no; HowWhat = single-image how/what questions; 2_/3_ImgCompare = items with 2 / 3 images",
           reason="FedMosaic paper App. A.27: 'by question type (e.g., Yes/No, How/what questions)'"),
    Choice(key="tasks.wcvqa", tag="I", decision="WCVQA uses WorldCuisines' original tasks and train split: task 1 dish name without context / with context / with adversarial context (prompt_type \"1\" / \"3\" / \"4\"), task 2 location (prompt_type \"2\"); English prompts; multiple choice from multi_choice_prompt",
           reason="FedMosaic paper App. A.27: 'using their original split'; the language is not stated"),
    Choice(key="tasks.seedbench2", tag="I", decision="SEED-Bench-2 KGQA = dimension 'Science Knowledge'; InstanceQA = 'Instance Identity', 'Instance Attributes', 'Instance Location', 'Instances Counting', 'Instance Interaction'; TemporalQA = Action Recognition/Prediction and Procedure Understanding (8 frames each)",
           reason="the paper names the tasks but not the SEED-Bench-2 dimensions behind them"),
    Choice(key="unseen.recipeqa", tag="I", decision="the two RecipeQA unseen tasks are DEMON's RecipeQA_ImageCoherence and RecipeQA_VisualCloze",
           reason="7 unseen tasks minus the 5 named ones leaves 2 RecipeQA subsets"),
    Choice(key="unseen.contrast-caption", tag="R", decision="Contrast-Caption seen/unseen image domains are two seeded halves of Mantis contrastive_caption until the image-domain split is published",
           reason="the paper does not say how images were judged in or out of LLaVA's pre-training distribution"),
    Choice(key="totals", tag="P", decision="the FedMosaic paper reports 375k images (Sec. 5, App. A.27) and 357K (Table 12) with 274K questions; drake_bench reports the computed totals of its build",
           reason="the paper's two image totals disagree, so neither can be checked against"),
    Choice(key="scenarios.dirichlet.tasks", tag="R", decision="the 10 merged Dirichlet tasks use IRFL MetaphorSimileMatching/IdiomMatching, IconQA MultiChoiceEasy/ShortAnswerEasy and Co-Instruct YesNo",
           reason="FedMosaic paper App. A.25 says it 'randomly choose[s]' the tasks without naming the IRFL / IconQA variants; fixing them makes the scenario reproducible (docs/design-notes.md#dirichlet-tasks)"),
    Choice(key="fl.eval_every_rounds", tag="R", decision="evaluate every 5 rounds (after rounds 5, 10, 15, 20); A_AUC = mean of those points",
           reason="FedMosaic paper Sec. 6.1: 'All experiments use five rounds of evaluation intervals' (docs/design-notes.md#eval-interval)"),
    Choice(key="model_allocations.placement", tag="R", decision="where the FedMosaic paper's Table 14 gives only model counts, models are placed by its Table 8 rule (larger models to clients with larger SFT gains)",
           reason="the paper gives per-client placement only for the default 1B/3B split (docs/design-notes.md#model-placement)"),
    Choice(key="model_allocations.random", tag="P", decision="the FedMosaic paper's Table 9 random 3/7..7/3 assignments are drawn at run time, not fixed in the manifest", reason="FedMosaic paper App. A.4 assigns model sizes to clients at random in each run"),
]


def drake() -> BenchmarkSpec:
    """The DRAKE benchmark spec (version 1.0.0)."""
    tasks = [_task(r) for r in _ROWS]
    clients = [ClientSpec(id=c, group=CLIENT_GROUP[c], tasks=TABLE_37[c]) for c in sorted(TABLE_37)]
    return BenchmarkSpec(
        name="drake", hub_repo="drake-bench/drake",
        version="1.1.0",
        title="DRAKE: multi-modal personalized federated learning benchmark",
        description=("40 training tasks from 19 datasets in 3 groups (visual relation, multi-modal reasoning, VQA), "
                     "10 clients x 4 tasks in the FedMosaic paper's Table 37 order, and 7 unseen tasks for fast adaptation."),
        modality="multimodal",
        tasks=tasks,
        clients=clients,
        unseen_tasks=UNSEEN_TASKS,
        fl=fl(rounds=20, local_steps=100, eval_every=5),
        scenarios=ScenarioDefaults(
            default="dynamic",
            asynchronous=AsyncDefaults(patterns=[[5, 5, 5, 5], [3, 7, 3, 7], [7, 3, 7, 3]]),
            dirichlet=DirichletDefaults(tasks=DIRICHLET_TASKS, alphas=[1.0, 0.5, 0.1]),
        ),
        model_allocations=_allocations(),
        default_allocation="default",
        subsampling=SUBSAMPLING,
        choices=[*SUBSAMPLING_CHOICES, *COMMON_CHOICES, *CHOICES],
        citation=PAPER,
    )
