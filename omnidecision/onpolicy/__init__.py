"""On-policy rounds: serve the current planner, collect on the training tasks, keep what it decided in its own
judge-correct runs (the default; the rule planner or an LLM labeller relabelling every visited state is a named
upper-bound arm), aggregate with earlier data, fine-tune."""
