"""What the `whiz` commands call: each command is a library function here, and cli.py only
parses flags."""
