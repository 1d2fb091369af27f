"""The branch feature: resume a recorded run at any step and branch it (`omnidecision branch`, docs/rollout.md).

Above the rollout engine (it reads records and recipes through `rollout`, runs the agent from a restored state):
`parent.py` finds a recorded run and rebuilds its task, recipe and environment, `resume.py` restores the state at
a step and continues, `recorded.py` replays the parent's role outputs and tool observations, `branch.py` applies a
decision and continues with a named policy, `cli.py` is the command.
"""
