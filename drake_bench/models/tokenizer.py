"""Tokenizer and processor for the tiny zoo, trained here with the ``tokenizers`` library.

The tiny models need a vocabulary that fits the synthetic world, not a 32k one
downloaded from the Hub. We train a byte-level BPE (so any string tokenizes,
including text in the synthetic languages) on the public-mix corpora and save it
as a standard ``PreTrainedTokenizerFast`` plus a ``LlavaProcessor``; from then on
everything goes through ``from_pretrained`` exactly as with ``llava-hf/llava-1.5-7b-hf``.

Choices: vocabulary 2,048 (small and fixed so every tiny model shares it);
special tokens ``<pad>`` (id 0), ``<s>`` (bos, 1), ``</s>`` (eos, 2), ``<image>`` (3);
bos is prepended to every encoded prompt, as LLaVA-1.5's Llama tokenizer does.
"""

from __future__ import annotations

from collections.abc import Iterable

PAD, BOS, EOS, IMAGE = "<pad>", "<s>", "</s>", "<image>"
SPECIAL_TOKENS = [PAD, BOS, EOS, IMAGE]
DEFAULT_VOCAB_SIZE = 2048

# Vision tower geometry shared by every tiny multimodal model: the images' native 64 px, one token per
# 16 x 16 px cell (the Swin tower's output grid) -> 16 image tokens per image, every token read ("full").
IMAGE_SIZE = 64
PATCH_SIZE = 16  # pixels per output token, what LlavaProcessor needs to count image tokens
IMAGE_TOKENS = (IMAGE_SIZE // PATCH_SIZE) ** 2

# LLaVA-1.5 conversation format as a chat template: "USER: <image>\n... ASSISTANT: ...</s>".
# drake_bench.models.prompting.build_prompt renders the same string (tested).
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'user' %}USER: "
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for item in message['content'] if item['type'] == 'image' %}<image>\n{% endfor %}"
    "{% for item in message['content'] if item['type'] == 'text' %}{{ item['text'] }}{% endfor %}{% endif %} "
    "{% else %}ASSISTANT: "
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for item in message['content'] if item['type'] == 'text' %}{{ item['text'] }}{% endfor %}{% endif %}"
    "</s>{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}ASSISTANT:{% endif %}"
)


def train_tokenizer(texts: Iterable[str], vocab_size: int = DEFAULT_VOCAB_SIZE):
    """Train a byte-level BPE on ``texts`` and wrap it as a ``PreTrainedTokenizerFast``.

    Deterministic for a given sequence of texts (BPE merges are counted, ties broken
    by the library's fixed order), so rebuilding the cache reproduces the same ids.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(texts), trainer=trainer)
    bos_id = tok.token_to_id(BOS)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A $B", special_tokens=[(BOS, bos_id)]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        extra_special_tokens={"image_token": IMAGE},
        padding_side="right",
        chat_template=CHAT_TEMPLATE,
    )
    return fast


def make_image_processor():
    """The CLIP image processor at the images' native 64 px (a no-op resize and crop, CLIP normalisation)."""
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    return CLIPImageProcessorPil(
        size={"shortest_edge": IMAGE_SIZE}, crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}
    )


def make_processor(tokenizer):
    """A ``LlavaProcessor`` over ``tokenizer`` with a CLIP image processor sized for the tiny tower.

    Synthetic images are 64x64 and are read at that size with CLIP's normalisation (llava-1.5 resizes
    to its tower's 336). The tower has no CLS token, so every output token is an image token.
    """
    from transformers import LlavaProcessor

    return LlavaProcessor(
        image_processor=make_image_processor(),
        tokenizer=tokenizer,
        patch_size=PATCH_SIZE,
        vision_feature_select_strategy="full",
        num_additional_image_tokens=0,
        chat_template=CHAT_TEMPLATE,
        image_token=IMAGE,
    )
