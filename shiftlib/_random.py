"""Seeds: one SeedSequence from whatever a user passes as ``random_state`` (shared by bias and drift)."""

from __future__ import annotations

import numpy as np

RandomState = int | np.random.Generator | np.random.SeedSequence | None


def seed_sequence(random_state: RandomState) -> np.random.SeedSequence:
    """One SeedSequence from an int / None / Generator / SeedSequence (children are spawned from it)."""
    if isinstance(random_state, np.random.SeedSequence):
        return random_state
    if isinstance(random_state, np.random.Generator):
        return np.random.SeedSequence(int(random_state.integers(2**63)))
    return np.random.SeedSequence(random_state)
