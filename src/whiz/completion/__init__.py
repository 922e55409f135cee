"""Completion as you type: fill-in-the-middle prompts, where a completion ends, and the service that
runs them on the engine (`/infill` and `/v1/completions` are its HTTP face, in `whiz.server`)."""
