"""On-policy rounds (DAgger-style): serve the current planner, collect on the training tasks, relabel every
state it visited with the rule decision (or an LLM labeller), aggregate with earlier data, fine-tune."""
