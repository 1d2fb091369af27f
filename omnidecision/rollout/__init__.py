"""The rollout layer: the engine that runs the agent over tasks (below collect, eval, the on-policy rounds, the TRL
environment and the branch feature, omnidecision/branch/, which resumes or branches a recorded run at any step;
docs/rollout.md).

    omnidecision collect --config configs/collect/synthetic-teacher.yaml --out runs/teacher   # collect drives it
"""
