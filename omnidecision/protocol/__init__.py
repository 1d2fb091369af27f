"""Shared types under the agent: actions, chat interface and backend spec, run records, the planner prompt,
SFT/RL rows and the rule planner. Imports only pydantic and `omnidecision.ledger` (docs/architecture.md)."""
