"""Model backends behind `protocol.chat.ChatBackend`, one registered kind per module (`backends.factory`):
OpenAI-compatible endpoints, the scripted teacher, the first-actionable baseline, the replay rules."""
