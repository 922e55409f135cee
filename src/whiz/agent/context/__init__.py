"""What the model is shown: the system prompt, the repository map, the code a task is about, the
project's instructions, test output, and the conversation kept inside the window."""
