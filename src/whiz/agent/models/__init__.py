"""A model client: the seam between the agent and a model, and its adapters."""
