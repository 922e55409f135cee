"""Compaction against a real server (on the fake engine, one token a byte) with a small window:
the agent learns the window at connect, a session many windows long keeps answering, and a
compacted conversation starts a fresh chain instead of chaining onto what the server holds."""

from __future__ import annotations

from pathlib import Path

from whiz.agent.config import AgentConfig
from whiz.agent.events import Collector
from whiz.agent.loop import Agent
from whiz.agent.models.whiz_model import WhizModel
from whiz.agent.project.workspace import Workspace
from whiz.client import ResponseError
from whiz.engine.fake import last_user_message

N_CTX = 8192


def data_file(i: int) -> str:
    return "".join(f"line {n} of file {i}: {'y' * 40}\n" for n in range(20))  # about 1,200 bytes


def script(conversation: str) -> str:
    if "You summarise a coding session" in conversation:
        return "The agent read data files for the user."
    last = last_user_message(conversation)
    if last.startswith("Read data"):
        return f"READ {last.split()[1]}"
    return "I read it."


async def test_a_session_many_windows_long_keeps_answering_over_the_socket(serve_fake, project: Path) -> None:
    server = serve_fake(script=script, engine_kw={"n_ctx": N_CTX})
    model = await WhizModel.open(server.root)
    assert model.context_window == N_CTX
    log: list[str] = []  # what happened, in order: compacted, chained, fresh, summary, refused
    events = Collector()
    create = model.socket.create

    async def recording(**body):
        if "summarise a coding session" in body["instructions"]:
            log.append("summary")
        else:
            log.append("chained" if body.get("previous_response_id") else "fresh")
        try:
            async for event in create(**body):
                yield event
        except ResponseError as exc:
            log.append(f"refused: {exc.code}")
            raise

    def sink(event: dict) -> None:
        events(event)
        if event["type"] == "item.completed" and event["item"]["type"] == "context_compacted":
            log.append("compacted")

    model.socket.create = recording
    for i in range(12):
        (project / f"data{i}.txt").write_text(data_file(i))
    config = AgentConfig(max_output_tokens=256, map_tokens=64)
    agent = Agent(model, Workspace(project), config=config, sink=sink)
    read = 0
    try:
        for i in range(12):
            result = await agent.run(f"Read data{i}.txt please")
            assert result.ok, result.message
            assert result.message == "I read it."
            read += 2 * len(data_file(i))  # attached to the task, and read
    finally:
        await model.close()

    assert read > 3 * N_CTX
    assert not [entry for entry in log if entry.startswith("refused")]  # never over the window
    assert log.count("compacted") >= 3 and log.count("chained") > log.count("fresh")
    for at, entry in enumerate(log):
        if entry == "compacted":  # the server's chain holds the old conversation: start anew
            assert log[at + 1] == "fresh", log
    assert all(c["after_tokens"] < c["before_tokens"] for c in events.items("context_compacted"))
