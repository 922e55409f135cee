"""The ChatML prompt: per-message rendering must equal Qwen's template over the whole text."""

from whiz.chat.messages import Message, Tool, ToolCall
from whiz.chat.template import DEFAULT_SYSTEM, ChatTemplate
from whiz.engine.fake import ByteTokenizer

WEATHER = Tool(
    "get_weather", "Weather for a city.", {"type": "object", "properties": {"city": {"type": "string"}}}
)


def text_of(tok: ByteTokenizer, tokens: list[int]) -> str:
    return b"".join(tok.piece(t) for t in tokens).decode()


def test_per_message_tokens_equal_whole_text_tokenization():
    tok = ByteTokenizer()
    template = ChatTemplate(tok)
    messages = [
        Message("system", "Be brief."),
        Message("user", "héllo"),
        Message("assistant", "hi there"),
        Message("user", "again"),
    ]
    whole = (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nhéllo<|im_end|>\n"
        "<|im_start|>assistant\nhi there<|im_end|>\n"
        "<|im_start|>user\nagain<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert template.encode(messages) == tok.encode(whole)


def test_default_system_prompt_when_none_given():
    tok = ByteTokenizer()
    prompt = text_of(tok, ChatTemplate(tok).encode([Message("user", "x")]))
    assert prompt.startswith(
        f"<|im_start|>system\n{DEFAULT_SYSTEM}<|im_end|>\n<|im_start|>user\nx<|im_end|>\n"
    )


def test_tools_block_lists_each_function_in_qwen_format():
    tok = ByteTokenizer()
    prompt = text_of(tok, ChatTemplate(tok).encode([Message("system", "S"), Message("user", "q")], [WEATHER]))
    expected_system = (
        "<|im_start|>system\nS\n\n# Tools\n\n"
        "You may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
        '{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city.", '
        '"parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}\n</tools>\n\n'
        "For each function call, return a json object with function name and arguments within "
        '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": '
        "<args-json-object>}\n</tool_call><|im_end|>\n"
    )
    assert prompt.startswith(expected_system)
    assert prompt.endswith("<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n")


def test_assistant_tool_calls_and_merged_tool_results_render_like_qwen():
    tok = ByteTokenizer()
    calls = (
        ToolCall("c1", "get_weather", '{"city": "Paris"}'),
        ToolCall("c2", "get_weather", '{"city": "Oslo"}'),
    )
    messages = [
        Message("user", "weather?"),
        Message("assistant", "Let me check.", calls),
        Message("tool", "sunny", tool_call_id="c1"),
        Message("tool", "rain", tool_call_id="c2"),
        Message("user", "thanks"),
    ]
    turns = text_of(tok, ChatTemplate(tok).encode_turns(messages))
    assert turns == (
        "<|im_start|>user\nweather?<|im_end|>\n"
        "<|im_start|>assistant\nLet me check.\n"
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\nrain\n</tool_response>"
        "<|im_end|>\n"
        "<|im_start|>user\nthanks<|im_end|>\n"
    )


def test_assistant_call_without_text_starts_with_the_tag():
    tok = ByteTokenizer()
    msg = Message("assistant", "", (ToolCall("c1", "f", "{}"),))
    turns = text_of(tok, ChatTemplate(tok).encode_turns([msg]))
    assert (
        turns
        == '<|im_start|>assistant\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call><|im_end|>\n'
    )


def test_remember_substitutes_the_exact_generated_tokens():
    tok = ByteTokenizer()
    template = ChatTemplate(tok)
    # Sampled tokens that re-tokenizing the text would not give back (here: a special token inside).
    sampled = tok.encode("hi") + [tok.eos] + tok.encode("!")
    template.remember("hi!", sampled)
    tokens = template.encode_turns([Message("assistant", "hi!"), Message("user", "u")])
    assert tokens == tok.encode("<|im_start|>assistant\n") + sampled + tok.encode(
        "<|im_end|>\n<|im_start|>user\nu<|im_end|>\n"
    )
    # A reply it did not generate is tokenized from its text.
    other = template.encode_turns([Message("assistant", "ho!")])
    assert other == tok.encode("<|im_start|>assistant\nho!<|im_end|>\n")


def test_next_turn_prompt_extends_the_previous_prompt_and_reply():
    tok = ByteTokenizer()
    template = ChatTemplate(tok)
    history = [Message("user", "one")]
    first = template.encode(history)
    reply = tok.encode("echo: one")
    template.remember("echo: one", reply)
    second = template.encode([*history, Message("assistant", "echo: one"), Message("user", "two")])
    assert second[: len(first) + len(reply)] == first + reply
