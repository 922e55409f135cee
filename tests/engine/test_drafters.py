from whiz.engine.drafters import ChainDrafter, PredictionDrafter, PromptLookupDrafter
from whiz.engine.speculative import BatchCost, DraftLength


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


def test_a_long_prediction_is_indexed_a_slice_per_draft_not_all_at_once():
    # An engine step builds no more index than a slice: a long prediction never stalls the
    # engine thread (8 MB indexed at once held every other stream for 11 s).
    step = PredictionDrafter.INDEX_STEP
    prediction = list(range(1000, 1000 + 10 * step))
    d = PredictionDrafter(prediction, 0)
    assert d.indexed == 0
    assert d.propose([], 3) == [1000, 1001, 1002]
    assert d.indexed == step
    # After an edit the model writes text from far into it: the anchor is found once that part
    # is indexed, a few steps later.
    at = 5 * step
    drafts = [d.propose([7, 7, *prediction[at : at + 8 + i]], 2) for i in range(6)]
    assert drafts[0] == [] and drafts[-1] == prediction[at + 13 : at + 15]


def length(**kw) -> DraftLength:
    # Each extra row costs 3 ms against 10 ms for a plain step: drafts pay only while they hit.
    return DraftLength(BatchCost({1: 10.0, 64: 199.0}), max_len=8, **kw)


def test_chain_takes_the_first_non_empty_draft():
    chain = ChainDrafter([(PredictionDrafter([], 0), length()), (PromptLookupDrafter(max_ngram=2), length())])
    assert chain.propose([1, 2, 3, 1, 2], 1) == [3]


class Fixed:
    """A drafter that always guesses the same tokens."""

    def __init__(self, tokens: list[int]):
        self.tokens = tokens

    def propose(self, context, n):
        return self.tokens[:n]


def test_chain_credits_the_drafter_that_drafted_and_skips_one_that_pauses():
    lookup, model = length(prior=0.7), length(prior=0.7)
    chain = ChainDrafter([(PromptLookupDrafter(max_ngram=2), lookup), (Fixed([7, 8, 9]), model)])
    draft = chain.propose([1, 2, 3, 1, 2], 8)
    assert draft == [3, 1, 2][: len(draft)] and draft  # lookup matched first
    chain.update(len(draft), 0)
    assert lookup.rate < 0.7 and model.rate == 0.7
    for _ in range(10):
        chain.update(3, 0)  # lookup keeps missing, until drafting with it no longer pays
    assert lookup.best() == 0
    # Lookup pauses itself; the next drafter in the chain drafts instead.
    draft = chain.propose([1, 2, 3, 1, 2], 8)
    assert draft and draft == [7, 8, 9][: len(draft)]
