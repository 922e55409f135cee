"""The coding agent: `loop.py` and what it calls by name, over five rooms: `context/` (what the model
is shown), `editing/` (edits, from the reply's text to the disk and back), `models/` (the model
clients), `store/` (what outlives the process) and `project/` (the folder the agent works in)."""
