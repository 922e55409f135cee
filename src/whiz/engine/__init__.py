"""The engine: token ids in, token streams out, over llama.cpp or a fake runtime."""
