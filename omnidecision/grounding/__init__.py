"""Grounded rewards: what executing a candidate decision from a recorded ledger state leads to (`returns`), the
reward audit of the proxies against it (`audit`, `metrics`, `report`), and the executed reward for GRPO (`reward`).

    omnidecision audit rewards --data runs/demo/data/rl --runs runs/demo/collect-dev --out runs/demo/audit
"""
