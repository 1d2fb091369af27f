"""The rollout engine: running the agent over tasks, below collect, eval, the on-policy rounds and the TRL environment.

    omnidecision collect --config configs/collect/synthetic-teacher.yaml --out runs/teacher   # collect drives it
"""
