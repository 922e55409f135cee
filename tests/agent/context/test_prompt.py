import os

from whiz.agent.context.prompt import echoes_instructions, repeats, system_prompt
from whiz.agent.project.workspace import Workspace


def test_the_small_models_own_wording_of_the_instructions_counts_as_an_echo():
    # The 0.5B writes "To change the file, ..." where the instructions say "To change a file, ...".
    reply = "To change the file, write the file's path on its own line.\nGREP some text\n"
    assert echoes_instructions(reply)


def test_a_reply_that_reads_real_files_is_not_an_echo():
    reply = "READ src/app.py 20-60\nGREP def mean\nI will change the file once I have read it."
    assert not echoes_instructions(reply)


def test_a_single_example_line_is_not_enough_to_call_a_reply_an_echo():
    # One look at the example path is a mistake to answer, not the instructions written back.
    assert not echoes_instructions("READ path/to/file.py 20-60\n")
    assert echoes_instructions("READ path/to/file.py\nLIST path/to/dir\n")


def test_a_reply_made_only_of_the_message_it_answers_repeats_it():
    told = "Your reply has code but no edit. To write a file, put its path alone on a line."
    assert repeats("To write a file, put its path alone on a line.", told)
    assert not repeats("Done.", told)  # short words that happen to be in it are an answer
    assert not repeats("To write a file, put its path alone on a line.\ngreet.py", told)


def test_a_fence_the_message_only_names_in_its_words_is_not_written_back():
    code = 'def f(x):\n    """x and one more, as a whole number."""\n    return x + 1'
    message = f"a.py:\n```\n{code}\n```\n\nWrite `f` fixed, whole, in one ```python block."
    assert not repeats(f"```python\n{code}\n```", message)
    assert repeats(f"```\n{code}\n```", message)  # its own fence, and its code: written back


def test_sessions_of_other_repositories_and_test_commands_share_the_prompts_whole_head(tmp_path):
    # A new session's first request prefills only what its prompt does not share with the last
    # session's: the rules and how to act come before the test command and the repository.
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    (one / "stats.py").write_text("def mean(xs):\n    return sum(xs) / len(xs)\n")
    (two / "names.py").write_text("def to_snake(name):\n    return name.lower()\n")
    first = system_prompt(Workspace(one), "text")
    second = system_prompt(Workspace(two), "text", test_cmd="pytest -q tests/test_names.py")
    shared = os.path.commonprefix([first, second])
    assert "When you have made the change, stop." in shared
    assert "Do not run tests" in first and "pytest -q tests/test_names.py" in second
    assert "to_snake" in second and "to_snake" not in shared
