import numpy as np

from whiz.engine.sampling import probabilities, sample
from whiz.engine.types import SamplingParams


def test_greedy_is_argmax():
    logits = np.array([0.1, 3.0, 2.9, -1.0], dtype=np.float32)
    assert sample(logits, SamplingParams(temperature=0), np.random.default_rng(0)) == 1


def test_top_k_and_top_p_limit_the_choices():
    logits = np.log(np.array([0.5, 0.3, 0.15, 0.05]))
    p = probabilities(logits, SamplingParams(temperature=1.0, top_k=2))
    assert p[2] == 0 and p[3] == 0 and abs(p.sum() - 1) < 1e-9
    p = probabilities(logits, SamplingParams(temperature=1.0, top_p=0.7))
    assert (p > 0).sum() == 2


def test_a_seed_repeats_and_draws_follow_the_distribution():
    logits = np.log(np.array([0.7, 0.2, 0.1]))
    params = SamplingParams(temperature=1.0, seed=5)
    a = [sample(logits, params, np.random.default_rng(5)) for _ in range(3)]
    b = [sample(logits, params, np.random.default_rng(5)) for _ in range(3)]
    assert a == b
    rng = np.random.default_rng(1)
    draws = [sample(logits, params, rng) for _ in range(3000)]
    assert abs(draws.count(0) / 3000 - 0.7) < 0.04
