"""Edits: read out of a reply, matched against the files, planned (pure), written all at once or not at
all, and undone."""
