"""On-policy rounds: serve the current planner, collect on the training tasks, then either fine-tune on what its own
judge-correct runs did (or on states relabelled by a named labeller), aggregated with earlier data, or (`mode: rl`)
run GRPO on every ledger state it visited (rounds.py, rl_round.py)."""
