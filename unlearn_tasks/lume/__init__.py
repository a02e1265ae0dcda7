"""LUME / SemEval-2025 Task 4: unlearning synthetic creative documents, synthetic PII biographies and real
biographies (regurgitation, knowledge, MIA and the task's aggregate score)."""
