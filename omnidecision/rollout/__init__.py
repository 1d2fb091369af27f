"""The rollout layer: the engine that runs the agent over tasks (below collect, eval, the on-policy rounds and the TRL
environment), and resumes or branches a recorded run at any step (`rollout.resume`, `rollout.branch`; docs/rollout.md).

    omnidecision collect --config configs/collect/synthetic-teacher.yaml --out runs/teacher   # collect drives it
    omnidecision branch --trajectories runs/teacher/trajectories.shard-0-of-1.jsonl --run-id RUN --step 2 --dry-run
"""
