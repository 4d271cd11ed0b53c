"""Seeds (shiftlib._random.seed_sequence): one SeedSequence from an int, None, a Generator or a SeedSequence, against
numpy's own constructors."""

from __future__ import annotations

import numpy as np

from shiftlib._random import seed_sequence


def test_an_int_is_numpys_seed_sequence_of_that_int() -> None:
    ss = seed_sequence(12345)
    assert ss.entropy == 12345
    np.testing.assert_array_equal(ss.generate_state(4), np.random.SeedSequence(12345).generate_state(4))
    # the same int, the same children (what bias and drift spawn their streams from)
    a = [c.generate_state(2) for c in seed_sequence(7).spawn(3)]
    b = [c.generate_state(2) for c in np.random.SeedSequence(7).spawn(3)]
    np.testing.assert_array_equal(a, b)


def test_a_seed_sequence_is_used_as_it_is_and_none_draws_fresh_entropy() -> None:
    ss = np.random.SeedSequence(3)
    assert seed_sequence(ss) is ss
    assert seed_sequence(None).entropy != seed_sequence(None).entropy  # OS entropy: equal with probability ~2⁻¹²⁸


def test_a_generator_gives_the_seed_sequence_of_its_next_draw_below_2_to_63() -> None:
    # the entropy is one draw of integers(2**63) from the generator, which advances it: a twin generator with the
    # same seed shows both the value and that the next draw is its second one
    g, twin = np.random.default_rng(99), np.random.default_rng(99)
    ss = seed_sequence(g)
    assert ss.entropy == int(twin.integers(2**63))
    assert int(g.integers(2**63)) == int(twin.integers(2**63))
