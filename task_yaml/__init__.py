"""lm-eval task YAMLs of lm-eval-unlearning, one folder per benchmark (scanned by lm-eval, not imported)."""
