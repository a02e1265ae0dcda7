"""The checkpoint ``unlearn run`` writes: its model card (:mod:`.model_card`), pushing it to the Hub (:mod:`.hub`),
and loading a LoRA adapter folder on its base model (:mod:`.adapter`)."""
