"""On-policy rounds: serve the current planner, collect on the training tasks, then either keep what it decided in its
own judge-correct runs (the default; the rule planner or an LLM labeller relabelling every visited state is a named
upper-bound arm), aggregated with earlier data, and fine-tune, or (`mode: rl`) run GRPO on every ledger state it
visited (rounds.py, rl_round.py)."""
