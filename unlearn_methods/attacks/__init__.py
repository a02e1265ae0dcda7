"""Attacks that test whether unlearning lasts: weight quantization (:mod:`.quantize`) and relearning on part of the
forget set (:mod:`.relearn`). Each writes an ordinary checkpoint folder that ``lm_eval`` loads as it is."""
