"""The HTTP and WebSocket server: OpenAI-compatible APIs over the engine."""
