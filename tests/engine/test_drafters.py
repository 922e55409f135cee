from whiz.engine.drafters import ChainDrafter, PredictionDrafter, PromptLookupDrafter


def test_prompt_lookup_copies_what_followed_the_last_ngram():
    d = PromptLookupDrafter(max_ngram=3, min_ngram=2)
    context = [1, 2, 3, 4, 5, 6, 9, 9, 2, 3]
    assert d.propose(context, 3) == [4, 5, 6]
    # The most recent earlier occurrence wins.
    context += [7, 8, 2, 3]
    assert d.propose(context, 2) == [7, 8]


def test_prompt_lookup_proposes_nothing_without_a_match():
    d = PromptLookupDrafter()
    assert d.propose([1, 2, 3, 4], 4) == []
    assert d.propose([5], 4) == []


def test_prediction_drafter_follows_and_reanchors_after_an_edit():
    prediction = list(range(100, 140))
    prompt = [1, 2, 3]
    d = PredictionDrafter(prediction, len(prompt))
    assert d.propose(prompt, 4) == [100, 101, 102, 103]
    # The model wrote the first 10 tokens as predicted.
    out = prediction[:10]
    assert d.propose(prompt + out, 3) == [110, 111, 112]
    # Then it changed two tokens (an edit) and came back to the predicted text.
    out += [7, 7] + prediction[12:20]
    assert d.propose(prompt + out, 3) == [120, 121, 122]


def test_prediction_drafter_waits_for_an_anchor_inside_new_text():
    d = PredictionDrafter(list(range(100, 120)), 0)
    assert d.propose([5, 6, 7, 8], 4) == []  # nothing like the prediction yet
    assert d.propose([5, 6, 7, 8, 104, 105], 2) == [106, 107]


def test_chain_takes_the_first_non_empty_draft():
    chain = ChainDrafter([PredictionDrafter([], 0), PromptLookupDrafter(max_ngram=2)])
    assert chain.propose([1, 2, 3, 1, 2], 1) == [3]
