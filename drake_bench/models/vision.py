"""The shared tiny vision tower: the stand-in for the CLIP encoder all LLaVA-1.5 checkpoints share.

Real LLaVA-1.5 models of every size reuse one CLIP ViT-L/14, pretrained on 400M image-text
pairs and kept frozen while the projector and the language model are trained. The tiny zoo
does the same in miniature: one ``CLIPVisionModel`` (the zoo's vision design) is trained
once per recipe on the synthetic world's public pictures, cached with ``save_pretrained``
under ``models_home()/_vision``, and copied into every tiny LLaVA before its own
pretraining, which then keeps it frozen.

The tower's training (what CLIP's contrastive pretraining gives a real tower: a
representation of what is in the picture):

* each step draws ``3/4 * tower_batch`` fresh single-object pictures
  (:func:`~drake_bench.synth.public.public_objects`) and ``1/4`` fresh multi-object public
  scenes (:func:`~drake_bench.synth.public.public_scenes`), never reusing a picture;
* single objects: the sum of cross-entropies on the object's shape, colour, size and drawn style
  and the picture's domain; scenes: binary cross-entropy on :func:`attribute_targets`; both read the
  mean of the tower's ``vision_feature_layer`` patch tokens (CLS dropped, as LLaVA reads them)
  through linear heads that are thrown away;
* AdamW (lr ``tower_lr``, no weight decay), single-threaded, same seed -> same weights.

Single objects carry most of the batch because a tiny ViT does not learn shapes from multi-object
scenes alone: one object with one label per picture makes every label unambiguous (measurements in
docs/findings/synth-generator-history.md). The cached tower's record (``_vision/drake_pretrain.json``,
also :func:`tower_report`) holds its loss curve and held-out accuracy per label on 400 unseen single
objects.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from .cache import RECIPE_FILE, VISION_DIR, build_cached, models_home

HEADS = ("shape", "color", "size", "style", "domain")


def head_vocabularies() -> list[list[str]]:
    """The class names of each head, in :data:`HEADS` order (the world's fixed tables)."""
    from ..synth.world import COLORS, DOMAINS, SHAPES, SIZES, STYLES

    return [list(SHAPES), list(COLORS), list(SIZES), list(STYLES), list(DOMAINS)]


def object_labels(scene: Any) -> list[int]:
    """Class ids (shape, colour, size, drawn style, domain) of a single-object picture."""
    o = scene.objects[0]
    style = "outlined" if scene.domain == "paper" else o.style  # the paper domain draws outlines only
    values = [o.shape, o.color, o.size, style, scene.domain]
    return [vocab.index(v) for vocab, v in zip(head_vocabularies(), values)]


def head_sizes() -> list[int]:
    return [len(vocab) for vocab in head_vocabularies()]


def attribute_targets(scene: Any) -> torch.Tensor:
    """Multi-hot attributes of a scene: colours, shapes, colour-shape pairs, object count, domain."""
    from ..synth.world import COLORS, DOMAINS, SHAPES

    cols, shapes, doms = list(COLORS), list(SHAPES), list(DOMAINS)
    v = torch.zeros(len(cols) + len(shapes) + len(cols) * len(shapes) + 4 + len(doms))
    for o in scene.objects:
        c, s = cols.index(o.color), shapes.index(o.shape)
        v[c] = 1
        v[len(cols) + s] = 1
        v[len(cols) + len(shapes) + c * len(shapes) + s] = 1
    base = len(cols) + len(shapes) + len(cols) * len(shapes)
    v[base + min(len(scene.objects), 3)] = 1
    v[base + 4 + doms.index(scene.domain)] = 1
    return v


def patch_tokens(tower: Any, pixels: torch.Tensor, layer: int) -> torch.Tensor:
    """The patch tokens LLaVA reads: ``hidden_states[layer]`` with CLS dropped (strategy "default")."""
    return tower(pixels, output_hidden_states=True).hidden_states[layer][:, 1:]


def image_features(tower: Any, pixels: torch.Tensor, layer: int) -> torch.Tensor:
    """Mean of :func:`patch_tokens`: what the throw-away heads read."""
    return patch_tokens(tower, pixels, layer).mean(1)


class TowerHeads(torch.nn.Module):
    """Throw-away linear heads that turn pooled tower features into the training labels."""

    def __init__(self, width: int):
        super().__init__()
        self.objects = torch.nn.Linear(width, sum(head_sizes()))
        self.scenes = torch.nn.Linear(width, attribute_targets(_blank_scene()).numel())

    def loss(self, single: torch.Tensor, labels: torch.Tensor, scenes: torch.Tensor, targets: torch.Tensor):
        logits = self.objects(single).split(head_sizes(), dim=1)
        ce = sum(torch.nn.functional.cross_entropy(lg, labels[:, j]) for j, lg in enumerate(logits))
        bce = torch.nn.functional.binary_cross_entropy_with_logits(self.scenes(scenes), targets)
        return ce + bce

    @torch.no_grad()
    def accuracy(self, single: torch.Tensor, labels: torch.Tensor) -> dict[str, float]:
        logits = self.objects(single).split(head_sizes(), dim=1)
        return {h: round(float((lg.argmax(1) == labels[:, j]).float().mean()), 4)
                for j, (h, lg) in enumerate(zip(HEADS, logits))}


def _blank_scene() -> Any:
    from ..synth.world import Obj, Scene

    return Scene(objects=[Obj("circle", "red")])


def _pixels(image_processor: Any, scenes: list[Any]) -> torch.Tensor:
    from ..synth.render import render

    return image_processor([render(sc) for sc in scenes], return_tensors="pt")["pixel_values"]


def train_tower(tower: Any, image_processor: Any, recipe: Any, layer: int, seed: int = 0) -> dict[str, Any]:
    """Train ``tower`` in place (see module docstring); returns the loss curve and held-out accuracies."""
    from ..synth.public import public_objects, public_scenes

    n_obj = max(1, round(recipe.tower_batch * 3 / 4))
    n_scene = max(1, recipe.tower_batch - n_obj)
    held_out = public_objects(10**7, 400, recipe.data_seed)  # indices no training step reaches
    held_pixels = _pixels(image_processor, held_out)
    held_labels = torch.tensor([object_labels(s) for s in held_out])
    losses: list[float] = []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed + 15485863)
            heads = TowerHeads(tower.config.hidden_size)
            opt = torch.optim.AdamW([*tower.parameters(), *heads.parameters()], lr=recipe.tower_lr, weight_decay=0.0)
            tower.requires_grad_(True)
            tower.train()
            for step in range(recipe.tower_steps):
                objs = public_objects(step * n_obj, n_obj, recipe.data_seed)
                scenes = public_scenes(n_scene, recipe.data_seed + 1, start=step * n_scene)
                loss = heads.loss(
                    image_features(tower, _pixels(image_processor, objs), layer),
                    torch.tensor([object_labels(s) for s in objs]),
                    image_features(tower, _pixels(image_processor, scenes), layer),
                    torch.stack([attribute_targets(s) for s in scenes]),
                )
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                losses.append(round(float(loss.detach()), 5))
            tower.eval()
            with torch.no_grad():
                accuracy = heads.accuracy(image_features(tower, held_pixels, layer), held_labels)
    finally:
        torch.set_num_threads(threads)
        tower.requires_grad_(False)
    return {"losses": losses, "held_out_accuracy": accuracy}


def _record(recipe: Any) -> dict[str, Any]:
    from .zoo import VISION_TOWER

    return {"tower": dict(VISION_TOWER), "tower_steps": recipe.tower_steps,
            "tower_batch": recipe.tower_batch, "tower_lr": recipe.tower_lr, "data_seed": recipe.data_seed,
            "version": recipe.version}


def ensure_vision_tower(recipe: Any) -> Path:
    """Directory of the shared pretrained tower for ``recipe`` (trained once, then cached)."""
    from transformers import CLIPVisionModel

    from .tokenizer import make_image_processor
    from .zoo import VISION_FEATURE_LAYER, vision_config

    def build(tmp: Path) -> dict[str, Any]:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(recipe.data_seed + 86028121)
            tower = CLIPVisionModel(vision_config())
        report = train_tower(tower, make_image_processor(), recipe, VISION_FEATURE_LAYER)
        tower.save_pretrained(tmp)
        return report

    return build_cached(models_home() / VISION_DIR, _record(recipe), build)


def install_tower(model: Any, path: Path) -> None:
    """Copy the shared tower's weights into a tiny LLaVA (same vision design) and freeze them."""
    from transformers import CLIPVisionModel

    shared = CLIPVisionModel.from_pretrained(path)
    model.model.vision_tower.load_state_dict(shared.state_dict())
    model.model.vision_tower.requires_grad_(False)


def tower_report(path: Path) -> dict[str, Any]:
    """The cached tower's record: recipe, loss curve and held-out accuracies."""
    return json.loads((Path(path) / RECIPE_FILE).read_text())
