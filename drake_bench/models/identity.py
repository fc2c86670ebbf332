"""What a method running the model zoo reports about its models: weight identity and inference settings.

The evaluator does not know about models; a method that runs them reports, through
:class:`drake_bench.plugins.protocol.ReportsModels`, what fixes each base model's weights and every
inference knob that moves scores. These two functions are that report for the zoo (tiny models
and real checkpoints by name), shared by the LoRA-based reference entries.
"""

from __future__ import annotations

from typing import Any

from drake_bench.errors import UnknownNameError


def model_identity(name: str) -> dict[str, Any]:
    """What fixes a base model's weights: a tiny zoo model's sha256, else its source.

    Tiny names carry the shipped checkpoint's identity (:func:`~drake_bench.models.shipped.shipped_identity`:
    the sha256 of its ``model.safetensors``); when they are pretrained locally instead
    (``DRAKE_BENCH_ZOO=pretrain``), the pretraining recipe, which does not pin the bytes (they differ
    across machines). Part of the checkpoint fingerprint (a run never resumes onto other bases) and of
    the result file (two results are comparable only on the same bases; ``drake-bench report`` refuses
    to mix them).
    """
    from drake_bench.models.shipped import shipped_identity, zoo_source
    from drake_bench.models.zoo import model_info

    try:
        entry = model_info(name)
    except UnknownNameError:  # a method that brings its own models (allocation names are free-form)
        return {"source": name}
    if entry.tiny:
        if zoo_source() == "shipped":
            return shipped_identity(name)
        from drake_bench.models.pretrain import DEFAULT_RECIPE

        return {"source": "drake_bench tiny zoo", "recipe": DEFAULT_RECIPE.as_dict()}
    return {"source": entry.source}


def architecture(name: str) -> str:
    """The architecture key of a zoo model (clients of one key can exchange parameters); the name itself otherwise."""
    from drake_bench.models.zoo import architecture_key

    try:
        return architecture_key(name)
    except Exception:  # not a zoo name (e.g. a model the method brings): the name is the architecture
        return name


def evaluation_settings() -> dict[str, Any]:
    """The zoo engine's inference settings (greedy decoding, cloze choice scoring, left padding)."""
    from drake_bench.models import engine, prompting

    return {
        "decoding": {
            "do_sample": False,
            "num_beams": 1,
            "max_new_tokens": engine.OPEN_MAX_NEW_TOKENS,
            "free_text_max_new_tokens": engine.FREE_TEXT_MAX_NEW_TOKENS,
            "choice_scoring": "option text log-likelihood (cloze)",
        },
        "batch_size": engine.EVAL_BATCH_SIZE,
        "prompt_template_version": prompting.TEMPLATE_VERSION,
        "padding_side": "left",
    }
