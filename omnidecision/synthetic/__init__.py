"""Synthetic data used in production: random reachable ledger states (rule-labelled rows) and the tiny
from-scratch Qwen3 planner builder (the demo, benchmarks and tests use both)."""
