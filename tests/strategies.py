"""Hypothesis strategies for inputs: scalars and arrays in a domain, and broadcastable shape
pairs."""

from __future__ import annotations

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

DOMAINS = {"real": (-2.0, 2.0), "pos": (0.3, 3.0), "unit": (-0.85, 0.85), "away": (0.5, 2.0)}


def floats(domain: str = "real") -> st.SearchStrategy[float]:
    lo, hi = DOMAINS[domain]
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False)


def arrays(shape: tuple[int, ...], domain: str = "real") -> st.SearchStrategy[np.ndarray]:
    return hnp.arrays(np.float64, shape, elements=floats(domain))


def shapes(min_dims: int = 0, max_dims: int = 3) -> st.SearchStrategy[tuple[int, ...]]:
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=1, max_side=4)


def values(domain: str = "real", min_dims: int = 0) -> st.SearchStrategy:
    """A Python float or an array of any small shape."""
    scalar = floats(domain) if min_dims == 0 else st.nothing()
    return scalar | shapes(min_dims=max(min_dims, 1)).flatmap(lambda s: arrays(s, domain))


def broadcast_pair(domain_a: str = "real", domain_b: str = "real") -> st.SearchStrategy[tuple]:
    """Two arrays whose shapes broadcast against each other."""
    pair = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3)
    return pair.flatmap(
        lambda s: st.tuples(
            arrays(s.input_shapes[0], domain_a), arrays(s.input_shapes[1], domain_b)
        )
    )


def half() -> settings:
    """Half the profile's examples (15 under CI's, a thousand under the long one): for property
    tests whose every example takes a random program's derivative two or three ways, a third of a
    second each, so that the default run keeps to its five minutes."""
    return settings(max_examples=max(10, settings.default.max_examples // 2))


def few(examples: int) -> int:
    """``examples`` under the CI profile (30 examples a test), proportionally more under a longer
    one (``HYPOTHESIS_PROFILE=long``): for tests that run every rule or every corpus function, each
    with few."""
    return max(examples, examples * settings.default.max_examples // 30)
