"""Modes, healing, the swarm and the safety policy: what runs around the agent. Depends on
`whiz.agent`, never the other way round."""
