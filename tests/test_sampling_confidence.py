"""Sampled hit rates say how far they can be trusted, and a sample too small to estimate is refused."""
from __future__ import annotations

import pytest

from analysis.sampling.confidence import MIN_SAMPLED_REFERENCES, check_sample_size, sample_warning, wilson_interval
from common.errors import InputError


def test_wilson_interval_against_hand_computed_values():
    """p = 0.5 over 100: (0.5 + 0.0192 -+ 1.96 sqrt(0.0025 + 0.0000960)) / 1.0384 = (0.4038, 0.5962);
    p = 0 over 10 keeps a non-zero upper bound (0.2775); no trials: the whole range."""
    lo, hi = wilson_interval(0.5, 100)
    assert lo == pytest.approx(0.40383, abs=1e-4) and hi == pytest.approx(0.59617, abs=1e-4)
    lo, hi = wilson_interval(0.0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.27753, abs=1e-4)
    assert wilson_interval(0.3, 0) == (0.0, 1.0)


def test_a_sample_too_small_to_estimate_is_refused_naming_the_rate_that_would_do():
    with pytest.raises(InputError, match=r"keeps about 10 of its 98,314 accesses.*--sample-rate 0\.00065 or more"):
        check_sample_size(98_314, 1e-4, "t.pptrace")
    with pytest.raises(InputError, match=r"no --sample-rate \(exact profiles\)"):
        check_sample_size(50, 0.5, "tiny.pptrace")
    check_sample_size(98_314, 0.01, "t.pptrace")  # about 983 references: usable, with a warning
    assert "more than 3 points" in sample_warning(98_314, 0.01)
    assert sample_warning(98_314, 0.1) is None and sample_warning(192, 1.0) is None
    check_sample_size(192, 1.0, "tiny.pptrace")   # rate 1 keeps everything: exact
    assert MIN_SAMPLED_REFERENCES == 64
