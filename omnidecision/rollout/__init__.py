"""The rollout layer: the engine that runs the agent over tasks, and resumes or branches a recorded run at any step
(`rollout.resume`, `rollout.branch`; docs/rollout.md)."""
