"""omnidecision: train and serve the planner of an evidence-ledger agent for omni-modal QA."""

__version__ = "0.1.0"
