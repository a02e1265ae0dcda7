"""`unlearn ci`: evaluate a checkpoint on a suite of lm-eval tasks and checks, for CI pipelines."""
