"""DUSK (Jeung et al., "DUSK: Do Not Unlearn Shared Knowledge", 2025): its measures as lm-eval tasks."""
