"""A tiny LLaVA (small CLIP-style vision tower + the tiny Llama) and its processor, assembled locally:
the CLEAR demo's and tests' vision-language model.

The processor is a real ``LlavaProcessor`` (``CLIPImageProcessor`` + the project's BPE tokenizer with an
``<image>`` token and a small chat template), so ``AutoModelForImageTextToText`` / ``AutoProcessor`` and lm-eval's
``hf-multimodal`` load the saved folder like any LLaVA checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from unlearn_methods import checkpoint_folder
from unlearn_methods.scaffolding.tiny_model import tiny_llama_config, train_tokenizer

IMAGE_TOKEN = "<image>"
#: A minimal LLaVA-1.5-style chat template: "USER: <image>\nquestion ASSISTANT:" (images as ``{"type": "image"}``).
CHAT_TEMPLATE = (
    "{% for m in messages %}{% if m['role'] == 'user' %}USER: {% elif m['role'] == 'assistant' %} ASSISTANT: "
    "{% else %}{{ m['role'] | upper }}: {% endif %}"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for c in m['content'] %}"
    "{% if c['type'] == 'image' %}<image>\n{% else %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %} ASSISTANT:{% endif %}"
)


def build_tiny_llava(texts: Iterable[str], out_dir: str | Path | None = None, seed: int = 0,
                     image_size: int = 32, patch_size: int = 8, vocab_size: int = 1024):
    """Randomly initialised tiny LLaVA + processor (saved to ``out_dir`` when given). Returns (model, processor).

    ``image_size / patch_size`` squared image tokens per image (16 for 32x32 images with 8x8 patches).
    """
    import torch
    from transformers import CLIPVisionConfig, LlavaConfig, LlavaForConditionalGeneration, LlavaProcessor

    try:
        from transformers import CLIPImageProcessorPil
    except ImportError:  # transformers 4.x: its CLIPImageProcessor is the PIL one (5.x renamed it)
        from transformers import CLIPImageProcessor as CLIPImageProcessorPil

    tokenizer = train_tokenizer(texts, vocab_size)
    tokenizer.add_special_tokens({"additional_special_tokens": [IMAGE_TOKEN]})
    image_token_id = tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)
    vision = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                              image_size=image_size, patch_size=patch_size, projection_dim=32)
    text = tiny_llama_config(len(tokenizer), bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                             pad_token_id=tokenizer.pad_token_id)
    config = LlavaConfig(vision_config=vision, text_config=text, image_token_index=image_token_id,
                         vision_feature_layer=-1, vision_feature_select_strategy="default",
                         projector_hidden_act="gelu", tie_word_embeddings=True)
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config)
    image_processor = CLIPImageProcessorPil(size={"shortest_edge": image_size},
                                            crop_size={"height": image_size, "width": image_size})
    processor = LlavaProcessor(image_processor=image_processor, tokenizer=tokenizer, patch_size=patch_size,
                               vision_feature_select_strategy="default", chat_template=CHAT_TEMPLATE,
                               num_additional_image_tokens=1)
    if out_dir is not None:
        with checkpoint_folder.writing(out_dir) as folder:
            model.save_pretrained(folder)
            processor.save_pretrained(folder)
    return model, processor
