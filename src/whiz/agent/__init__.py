"""The coding agent: workspace access, edit parsing and application, undo, and the repository map."""
