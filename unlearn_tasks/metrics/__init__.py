"""Pure metric functions over numbers: no lm-eval, no models. Each follows a published definition."""
