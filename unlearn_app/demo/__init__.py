"""``unlearn demo``: the offline end-to-end demos (:mod:`.tofu` the tiny model, :mod:`.pretrained` SmolLM2,
:mod:`.clear` CLEAR on a tiny LLaVA)."""
