"""A conversation that outgrows the context window keeps working: before a request that would not
fit, long outputs are cut and earlier turns summarised (the recent turn stays whole), every
request fits, a reply cut by the window is not blamed on the model, and a server that counts
more than the estimate gets a compacted retry."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

from whiz.agent.context.compaction import SUMMARY_INSTRUCTIONS, input_budget
from whiz.agent.models.scripted_model import ScriptedModel
from whiz.agent.models.seam import Finished, ModelEvent, ModelRequest, ModelText, output_items
from whiz.client import ResponseError

WINDOW = 4000
REPLY = 256


def data_file(i: int) -> str:
    return "".join(f"line {n} of data file {i}: {'x' * 40}\n" for n in range(60))  # about 3,500 chars


def reader(request: ModelRequest) -> str:
    """Reads the file a task names, then says it read it; summarises when asked to."""
    if request.instructions == SUMMARY_INSTRUCTIONS:
        return "The user had the agent read data files one at a time; nothing was changed."
    last = request.items[-1]
    if last.get("role") == "user" and last["content"].startswith("Read data"):
        return f"READ {last['content'].split()[1]}"
    return "I read it."


def tokens(request: ModelRequest) -> int:
    """What the scripted server counts for a request (see `ScriptedModel._usage`)."""
    return ScriptedModel._usage(request, "")["input_tokens"]


async def test_a_session_three_times_the_window_keeps_answering_and_every_request_fits(
    harness, project: Path
) -> None:
    turns = 14
    for i in range(turns):
        (project / f"data{i}.txt").write_text(data_file(i))
    h = harness([reader] * 100, context_tokens=WINDOW, max_output_tokens=REPLY, map_tokens=64)

    for i in range(turns):
        result = await h.agent.run(f"Read data{i}.txt please")
        assert result.ok, result.message
        assert result.message == "I read it."

    assert turns * len(data_file(0)) / 4 > 3 * WINDOW  # what was read is well over 3 windows
    for request in h.model.requests:
        assert tokens(request) + (request.max_output_tokens or 0) <= WINDOW
    compacted = h.events.items("context_compacted")
    assert compacted and all(c["after_tokens"] < c["before_tokens"] for c in compacted)
    assert any(c["summarised"] for c in compacted)
    # The latest turn is whole: the model saw the last file it read in full.
    assert any(data_file(turns - 1) in str(i.get("content")) for i in h.model.requests[-1].items)
    # The summary keeps the tasks (written by whiz, not the model) and the model's own summary.
    summary = h.agent.items[0]["content"]
    assert "Read data0.txt please" in summary and "one at a time" in summary


async def test_old_outputs_are_cut_to_head_and_tail_before_anything_is_summarised(
    harness, project: Path
) -> None:
    (project / "big.txt").write_text(data_file(1))
    h = harness([reader] * 10, context_tokens=3000, max_output_tokens=REPLY, map_tokens=64)
    assert (await h.agent.run("Read big.txt now")).ok
    assert (await h.agent.run("What is in it?")).ok  # fits: nothing done

    done = await h.agent.compact(force=True)

    assert done is not None and done.shortened and not done.summarised
    read_back = next(i["content"] for i in h.agent.items if "line 0 of data file 1" in str(i.get("content")))
    assert "line 59 of data file 1" in read_back  # the tail stays
    assert "cut to fit the context window" in read_back
    assert "line 30 of data file 1" not in read_back
    assert not [r for r in h.model.requests if r.instructions == SUMMARY_INSTRUCTIONS]


async def test_without_a_known_window_nothing_is_compacted(harness, project: Path) -> None:
    (project / "big.txt").write_text(data_file(1) * 4)
    h = harness([reader] * 10, map_tokens=64)
    assert (await h.agent.run("Read big.txt now")).ok
    assert await h.agent.compact(force=True) is None
    assert not h.events.items("context_compacted")


class Cut:
    """A model whose first reply stops short after `written` tokens, then answers plainly."""

    def __init__(self, written: int):
        self.written = written
        self.calls = 0

    async def respond(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.calls += 1
        text = "half of a reply" if self.calls == 1 else "All done."
        yield ModelText(text)
        status = "incomplete" if self.calls == 1 else "completed"
        yield Finished(status, output_items(text, []), {"input_tokens": 10, "output_tokens": self.written})

    async def cancel(self) -> None:
        return None


async def test_a_reply_cut_by_the_window_is_not_called_too_long(harness) -> None:
    h = harness([], max_output_tokens=2048)
    h.agent.model = Cut(written=300)  # the window ended it long before the 2,048-token limit
    assert (await h.agent.run("do it")).ok
    told = [i["content"] for i in h.agent.items if i.get("role") == "user"]
    assert any("filled the context window" in t for t in told)
    assert not any("Make smaller edits" in t for t in told)


async def test_a_reply_cut_at_the_output_limit_asks_for_smaller_edits(harness) -> None:
    h = harness([], max_output_tokens=2048)
    h.agent.model = Cut(written=2048)
    assert (await h.agent.run("do it")).ok
    told = [i["content"] for i in h.agent.items if i.get("role") == "user"]
    assert any("Make smaller edits" in t for t in told)


async def test_a_request_the_server_finds_too_long_is_compacted_and_sent_again(harness) -> None:
    overflow = ResponseError(
        "This request needs 9000 tokens, but the context window is 4000 tokens. Shorten the input.",
        code="context_length_exceeded",
    )

    def answer(request: ModelRequest) -> str:
        return "Questions were asked." if request.instructions == SUMMARY_INSTRUCTIONS else "Done."

    h = harness([overflow, answer, answer], context_tokens=4000, max_output_tokens=REPLY, map_tokens=64)
    for i in range(4):  # about 8,000 characters: fits by the first estimate, not by the server's count
        h.agent.items += [
            {"type": "message", "role": "user", "content": f"question {i}"},
            {"type": "message", "role": "assistant", "content": data_file(i)[:2000]},
        ]

    result = await h.agent.run("and now?")

    assert result.ok and result.message == "Done."
    first, second = h.model.requests[0], h.model.requests[-1]
    assert second.instructions == first.instructions  # the task's own request, sent again
    assert len(str(second.items)) < len(str(first.items)) / 2
    assert h.events.items("context_compacted")
    assert second.items[-1]["content"] == "and now?"


def test_the_budget_leaves_room_for_the_reply() -> None:
    assert input_budget(8192, 2048) <= 8192 - 2048
