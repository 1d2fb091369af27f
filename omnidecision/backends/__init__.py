"""Model backends behind `protocol.chat.ChatBackend`: OpenAI-compatible endpoints, the scripted teacher."""
