"""What the agent keeps on disk so that a crash or a restart loses nothing: sessions, their lock,
the edit journal, and durable writes."""
