"""The project the agent works in: its folder, the files that look like secrets, the files that are
tests."""
