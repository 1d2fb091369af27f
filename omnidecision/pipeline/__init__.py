"""The pipeline: the demo and the experiment as lists of the project's own commands over shipped recipes.

    omnidecision demo --dry-run                                        # the plan as a shell script
    omnidecision experiment --config configs/experiment/default.yaml   # several starts, RL replicates, contrasts

Modules, one job each: `arms` (the arm table: adding an arm is one row plus its recipe), `plan` (Step, build_plan,
the script), `budget` (controls matched on consumed optimizer rows), `scheduler` (subprocesses side by side, fixed
threads, core pinning, restart), `summary` (summary.json and Markdown of one start), `contrasts` (planned
contrasts with hierarchical intervals), `experiment` (the recipe, pooling over starts), `cli` (the two commands).
Nothing here imports another omnidecision package at import time (tests/architecture/test_import_rules.py).
"""
