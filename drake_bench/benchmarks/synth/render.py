"""Pillow rendering of synthetic scenes into 64x64 RGB images.

Only deterministic Pillow/numpy operations are used (no antialiasing that depends on
a font cache except the bundled default font), so the same scene gives the same bytes.
"""

from __future__ import annotations

import contextvars
import math
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw, ImageEnhance, ImageFilter, ImageFont

from drake_bench.benchmarks.synth.world import COLORS, DOMAINS, GROUP_DOMAINS, SIZES, Obj, Scene

SIDE = 64
_group_domain: contextvars.ContextVar[str | None] = contextvars.ContextVar("synth_group_domain", default=None)


@contextmanager
def group_domain(domain: str | None) -> Iterator[None]:
    """Render every default ("plain") scene drawn inside the block in a group's visual domain (``GROUP_DOMAINS``).

    Generators stay domain-free: the loader wraps a task's generator in this block when the task's rule names a
    ``visual_domain``, so one generator serves a group-specific and a plain task alike. Scenes that name their own
    domain (icons on paper, dishes on a table) keep it."""
    if domain is not None and domain not in GROUP_DOMAINS:
        raise ValueError(f"unknown group visual domain {domain!r}; known: {sorted(GROUP_DOMAINS)}")
    token = _group_domain.set(domain)
    try:
        yield
    finally:
        _group_domain.reset(token)


def _polygon(shape: str, x: int, y: int, r: int, rotation: int = 0) -> list[tuple[float, float]]:
    if shape == "square":
        pts = [(-r, -r), (r, -r), (r, r), (-r, r)]
    elif shape == "triangle":
        pts = [(0, -r), (r, r * 0.85), (-r, r * 0.85)]
    elif shape == "diamond":
        pts = [(0, -r), (r, 0), (0, r), (-r, 0)]
    elif shape == "cross":
        t = r * 0.38
        pts = [
            (-t, -r),
            (t, -r),
            (t, -t),
            (r, -t),
            (r, t),
            (t, t),
            (t, r),
            (-t, r),
            (-t, t),
            (-r, t),
            (-r, -t),
            (-t, -t),
        ]
    elif shape == "star":
        pts = []
        for k in range(10):
            rad = r if k % 2 == 0 else r * 0.45
            a = -math.pi / 2 + k * math.pi / 5
            pts.append((rad * math.cos(a), rad * math.sin(a)))
    else:
        raise ValueError(f"unknown polygon shape {shape!r}")
    c, s = math.cos(math.radians(rotation)), math.sin(math.radians(rotation))
    return [(x + px * c - py * s, y + px * s + py * c) for px, py in pts]


def draw_obj(draw: ImageDraw.ImageDraw, o: Obj, outline_only_color: tuple[int, int, int] | None = None) -> None:
    r = SIZES[o.size]
    col = COLORS[o.color]
    fill = None if o.style == "outlined" else col
    line = outline_only_color or col
    width = 3 if o.style == "outlined" else 1
    if o.shape == "circle":
        box = [o.x - r, o.y - r, o.x + r, o.y + r]
        draw.ellipse(box, fill=fill, outline=line, width=width)
    else:
        draw.polygon(_polygon(o.shape, o.x, o.y, r, o.rotation), fill=fill, outline=line, width=width)
    if o.style == "striped":  # white horizontal stripes over the filled shape
        for yy in range(o.y - r + 2, o.y + r, 4):
            draw.line([(o.x - r, yy), (o.x + r, yy)], fill=(255, 255, 255), width=1)
        if o.shape == "circle":
            draw.ellipse([o.x - r, o.y - r, o.x + r, o.y + r], outline=col, width=2)
        else:
            draw.polygon(_polygon(o.shape, o.x, o.y, r, o.rotation), outline=col, width=2)
    if o.cracked:  # a bold dark zig-zag: the "defect" of the inspection tasks
        pts = [
            (o.x - r, o.y - r // 2),
            (o.x - r // 3, o.y + r // 3),
            (o.x + r // 3, o.y - r // 3),
            (o.x + r, o.y + r // 2),
        ]
        draw.line(pts, fill=(20, 20, 20), width=3)
    if o.state != "calm":
        draw_state(draw, o)


def draw_state(draw: ImageDraw.ImageDraw, o: Obj) -> None:
    """Comic emanata for an object's state, in ink just beyond its outline: eight short rays (shining) or two
    tremble strokes on each side (shaking). Drawn outside the object, so its colour and shape stay readable."""
    r = SIZES[o.size]
    ink = (20, 20, 20)
    if o.state == "shining":
        for k in range(8):
            a = k * math.pi / 4 + math.pi / 8
            c, s = math.cos(a), math.sin(a)
            draw.line(
                [(o.x + (r + 3) * c, o.y + (r + 3) * s), (o.x + (r + 7) * c, o.y + (r + 7) * s)], fill=ink, width=2
            )
    elif o.state == "shaking":
        h = max(3, r // 2)
        for side in (-1, 1):
            for off in (3, 6):
                x = o.x + side * (r + off)
                draw.line([(x, o.y - h), (x, o.y + h)], fill=ink, width=1 + (off == 3))
    else:
        raise ValueError(f"unknown object state {o.state!r}")


@lru_cache(maxsize=4)
def font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    return ImageFont.load_default(size=size)


def render(scene: Scene) -> Image.Image:
    """Render a scene: background and objects by domain, optional big text, then the distortion."""
    group = _group_domain.get()
    img = _render_group(scene, group) if group is not None and scene.domain == "plain" else _render_shared(scene)
    if scene.text:
        draw = ImageDraw.Draw(img)
        f = font(30 if len(scene.text) <= 2 else 20)
        box = draw.textbbox((0, 0), scene.text, font=f)
        w, h = box[2] - box[0], box[3] - box[1]
        ink = (20, 20, 20) if scene.domain != "night" else (240, 240, 240)
        draw.text(((SIDE - w) / 2 - box[0], (SIDE - h) / 2 - box[1]), scene.text, fill=ink, font=f)
    return distort(img, scene.distortion, seed=hash_scene(scene), grain=scene.grain)


def _render_shared(scene: Scene) -> Image.Image:
    """Background and objects of a scene in one of the shared ``DOMAINS``."""
    img = Image.new("RGB", (SIDE, SIDE), DOMAINS[scene.domain])
    draw = ImageDraw.Draw(img)
    if scene.domain == "table":  # a white plate
        draw.ellipse([3, 3, 60, 60], fill=(245, 245, 240), outline=(200, 200, 200), width=2)
    if scene.domain == "canvas":  # deterministic brush texture
        for k in range(0, SIDE, 6):
            draw.line([(0, k), (SIDE, k + 5)], fill=(210, 192, 150), width=2)
    for o in scene.objects:
        if scene.domain == "paper":
            draw_obj(draw, Obj(**{**o.__dict__, "style": "outlined"}), outline_only_color=COLORS[o.color])
        else:
            draw_obj(draw, o)
    return img


def _render_group(scene: Scene, domain: str) -> Image.Image:
    """Background and objects of a plain scene in a group domain: the same objects, colours and positions, other
    surroundings (text and distortion are drawn by :func:`render`, as for every domain).

    ``studio`` (product photography): a wall over a darker floor, a soft cast shadow under each object and a
    shaded rim. ``comic`` (drawings and panels): halftone dots on cream paper, a black panel frame and black ink
    around every object. Objects keep their fill colours, so every question stays answerable."""
    img = Image.new("RGB", (SIDE, SIDE), GROUP_DOMAINS[domain])
    draw = ImageDraw.Draw(img)
    if domain == "studio":
        draw.rectangle([0, 44, SIDE, SIDE], fill=(176, 170, 166))  # floor
        draw.line([(0, 44), (SIDE, 44)], fill=(150, 144, 140), width=1)
        for o in scene.objects:  # shadows first, so no shadow falls on an object; flat and pale, not object-like
            r = SIZES[o.size]
            draw.ellipse([o.x - r + 2, o.y + r - 2, o.x + r + 4, o.y + r + 2], fill=(150, 148, 156))
        for o in scene.objects:
            draw_obj(draw, o)
            rim = tuple(int(c * 0.55) for c in COLORS[o.color])
            _outline(draw, o, rim, 1)
    elif domain == "comic":
        for yy in range(2, SIDE, 4):  # halftone dots, offset every other row
            for xx in range(2 + (yy // 4 % 2) * 2, SIDE, 4):
                draw.point((xx, yy), fill=(214, 196, 160))
        draw.rectangle([0, 0, SIDE - 1, SIDE - 1], outline=(15, 15, 15), width=2)
        for o in scene.objects:  # ink just outside the fill, so small objects keep every coloured pixel
            draw_obj(draw, o)
            _outline(draw, o, (15, 15, 15), 2 if o.size == "large" and o.style != "outlined" else 1, outside=True)
    return img


def _outline(draw: ImageDraw.ImageDraw, o: Obj, color: tuple[int, ...], width: int, outside: bool = False) -> None:
    """An outline of ``width`` px (Pillow draws it inwards from the radius); ``outside``: beyond the fill."""
    r = SIZES[o.size] + (width if outside else 0)
    if o.shape == "circle":
        draw.ellipse([o.x - r, o.y - r, o.x + r, o.y + r], outline=color, width=width)
    else:
        draw.polygon(_polygon(o.shape, o.x, o.y, r, o.rotation), outline=color, width=width)


def hash_scene(scene: Scene) -> int:
    import zlib

    return zlib.crc32(repr(scene).encode())


def distort(img: Image.Image, kind: str | None, seed: int = 0, grain: int = 1) -> Image.Image:
    """Image-quality distortions (Co-Instruct analogue). Strong enough to see at 48 px.

    Noise with ``grain`` 1 is independent colour noise per pixel; ``grain`` g > 1 is monochrome noise on g x g
    cells (sensor-like luma grain), the same strength, but its images compress to about a fifth.
    """
    if kind is None:
        return img
    if kind == "blur":
        return img.filter(ImageFilter.GaussianBlur(2.2))
    if kind == "noise":
        arr = np.asarray(img).astype(np.int16)
        rng = np.random.default_rng(seed)
        if grain == 1:
            noise = rng.normal(0, 55, arr.shape).astype(np.int16)
        else:
            cells = rng.normal(0, 55, (-(-arr.shape[0] // grain), -(-arr.shape[1] // grain), 1))
            noise = np.repeat(np.repeat(cells, grain, 0), grain, 1)[: arr.shape[0], : arr.shape[1]].astype(np.int16)
        return Image.fromarray(np.clip(arr + noise, 0, 255).astype(np.uint8))
    if kind == "darkness":
        return ImageEnhance.Brightness(img).enhance(0.3)
    if kind == "glare":
        return ImageEnhance.Brightness(img).enhance(1.9)
    raise ValueError(f"unknown distortion {kind!r}")


def render_bars(values: dict[str, int], domain: str = "plain") -> Image.Image:
    """Bar chart (DVQA analogue): one bar per colour, heights 1..5 units of 10 px."""
    img = Image.new("RGB", (SIDE, SIDE), DOMAINS[domain])
    draw = ImageDraw.Draw(img)
    n = len(values)
    w = (SIDE - 8) // n
    draw.line([(3, 60), (61, 60)], fill=(0, 0, 0), width=2)
    for i, (color, v) in enumerate(values.items()):
        x0 = 5 + i * w
        draw.rectangle([x0 + 1, 60 - v * 10, x0 + w - 3, 59], fill=COLORS[color])
    return img


def render_clock(hour: int, domain: str = "paper") -> Image.Image:
    """Clock face with one thick hour hand and 4 tick marks (icon-domain reading task)."""
    img = Image.new("RGB", (SIDE, SIDE), DOMAINS[domain])
    draw = ImageDraw.Draw(img)
    draw.ellipse([4, 4, 60, 60], outline=(0, 0, 0), width=3)
    for k in range(12):
        a = math.radians(k * 30 - 90)
        r0 = 22 if k % 3 else 18
        draw.line(
            [(32 + r0 * math.cos(a), 32 + r0 * math.sin(a)), (32 + 26 * math.cos(a), 32 + 26 * math.sin(a))],
            fill=(0, 0, 0),
            width=2,
        )
    a = math.radians((hour % 12) * 30 - 90)
    draw.line([(32, 32), (32 + 19 * math.cos(a), 32 + 19 * math.sin(a))], fill=(200, 20, 20), width=4)
    draw.ellipse([29, 29, 35, 35], fill=(0, 0, 0))
    return img
