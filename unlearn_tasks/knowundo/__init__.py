"""KnowUnDo (Tian et al., EMNLP 2025 Findings): copyrighted and private knowledge, each split into what unlearning
must remove (Unlearn Scope) and what it must keep (Retention Scope)."""
