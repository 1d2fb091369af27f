"""The branch feature: resume a recorded run at any step and branch it (`omnidecision branch`, docs/rollout.md).

Above the rollout engine (it reads records and recipes through `rollout`, runs the agent from a restored state):
`parent.py` finds a recorded run, verifies it by replay and resolves its task, recipe and environment once
(`ParentRun`), `resume.py` restores the state at a step and continues, `recorded.py` replays the parent's role outputs
and tool observations, `branch.py` restores the branch at its step with its decision and a named policy
(`branch_point`, which `resume` runs), `cli.py` is the command.
"""
