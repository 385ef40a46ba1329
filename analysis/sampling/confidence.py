"""How far a sampled estimate can be trusted: refuse a sample too small to estimate anything, and give
every sampled hit rate a confidence interval.

A sampled profile at rate r of N accesses rests on about n = r N sampled references. A hit rate p over
them has, as a binomial proportion, the Wilson score interval

    (p + z²/2n ± z sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n),   z = 1.96 for 95 %.

SHARDS keeps or drops whole lines, so the sampled references are correlated and the true interval is
wider: this one is a lower bound on the uncertainty, which is why too small a sample is refused outright.
"""
from __future__ import annotations

import math

from common.errors import InputError

MIN_SAMPLED_REFERENCES = 64     # below this a 95 % interval of a 50 % hit rate spans more than +-12 points
GOOD_SAMPLED_REFERENCES = 1000  # from this on it is within +-3 points
Z_95 = 1.959963984540054


def expected_sample(accesses: float, rate: float) -> float:
    """References a sample at `rate` of `accesses` rests on."""
    return max(0.0, float(accesses) * float(rate))


def check_sample_size(accesses: float, rate: float, what: str) -> None:
    """Refuse a sample too small to estimate hit rates from, naming the rate that would do (rate 1 keeps
    everything: exact, whatever the size)."""
    if rate >= 1:
        return
    n = expected_sample(accesses, rate)
    if n < MIN_SAMPLED_REFERENCES:
        needed = MIN_SAMPLED_REFERENCES / max(float(accesses), 1.0)
        advice = f"--sample-rate {needed:.2g} or more" if needed <= 1 else "no --sample-rate (exact profiles)"
        raise InputError(f"{what}: --sample-rate {rate:g} keeps about {n:.0f} of its {accesses:,.0f} accesses; "
                         f"an estimate needs at least {MIN_SAMPLED_REFERENCES:,}: give {advice}")


def sample_warning(accesses: float, rate: float) -> str | None:
    """A sentence for a sample that is usable but small (its intervals are wide), else None."""
    n = expected_sample(accesses, rate)
    if rate >= 1 or n >= GOOD_SAMPLED_REFERENCES:
        return None
    return (f"the sample rests on about {n:.0f} references, so its hit rates are uncertain by more than "
            f"3 points (pptmc hitrates reports each one's 95 % interval); a higher --sample-rate narrows them")


def wilson_interval(p: float, n: float, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a proportion p observed over n trials (clipped to [0, 1])."""
    if n <= 0:
        return 0.0, 1.0
    p = min(max(p, 0.0), 1.0)
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    scale = 1 + z * z / n
    return max(0.0, (centre - spread) / scale), min(1.0, (centre + spread) / scale)
