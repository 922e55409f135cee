"""What a tool's result reads like to the model: text as it is, other content named and sized."""

from __future__ import annotations

from mcp.types import (
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from whiz.mcp.tools import result_text


def test_text_is_kept_and_other_content_is_summarized() -> None:
    result = CallToolResult(
        content=[
            TextContent(type="text", text="two files"),
            ImageContent(type="image", data="aGVsbG8gd29ybGQh", mime_type="image/png"),
            ResourceLink(type="resource_link", uri="file:///a.txt", name="a.txt"),
            EmbeddedResource(type="resource", resource=TextResourceContents(uri="file:///b.txt", text="bee")),
        ]
    )
    assert result_text(result).splitlines() == [
        "two files",
        "[image image/png, 12 bytes, not shown]",
        "[resource file:///a.txt (a.txt)]",
        "[resource file:///b.txt]",
        "bee",
    ]


def test_structured_content_alone_is_json_and_an_error_says_so() -> None:
    assert result_text(CallToolResult(content=[], structured_content={"n": 2})) == '{"n": 2}'
    failed = CallToolResult(content=[TextContent(type="text", text="no such file")], is_error=True)
    assert result_text(failed) == "The tool reported an error: no such file"
    assert result_text(CallToolResult(content=[])) == "(no output)"
