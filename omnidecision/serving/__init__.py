"""Serving: start/stop vLLM OpenAI-compatible servers for local checkpoints (see vllm_server.py)."""
