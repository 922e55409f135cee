"""The model's conversation format: messages to tokens, and generated text back to messages."""
