"""`whiz acp`: the whiz agent inside editors (Zed, JetBrains, Neovim) over the Agent Client Protocol.

The editor starts `whiz acp` and speaks JSON-RPC on its stdin and stdout through the ACP SDK
(`agent-client-protocol`); each ACP session is one `AgentSession`, the same agent as `whiz code`.

    agent.py        the ACP agent: initialize, sessions (new, load, list), prompt, cancel, modes
    runner.py       the thread the agents run on, beside the one that speaks the protocol
    updates.py      the agent's events as `session/update` notifications (text, tool calls, diffs)
    diffs.py        a file's old text from its new text and a unified diff, for ACP's diff content
    files.py        the workspace's files through the editor's `fs/*` (its unsaved buffers)
    permissions.py  approval requests as `session/request_permission`
    stdio.py        run it on stdin and stdout, with nothing else written to stdout
"""
