"""Closure-aligned GRPO of the planner: recipes (config), RL state data, training (train), held-out evaluation.

    omnidecision grpo --config configs/grpo/tiny-cpu.yaml
"""
