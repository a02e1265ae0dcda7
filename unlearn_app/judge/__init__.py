"""``unlearn judge``: a model as judge of a run's generated answers (:mod:`.inputs` reads them, :mod:`.prompt_files`
holds the versioned prompts, :mod:`.ask` asks through lm-eval's model classes, :mod:`.cache` keeps the replies,
:mod:`.judging` runs one pass, :mod:`.results` writes lm-eval-shaped results). The verdict rules and aggregates are
pure functions in :mod:`unlearn_tasks.metrics.judge`."""
