"""hitrates.with_first_level: a simulated first level combined with SDCM's deeper levels."""
import pytest

from common.errors import InputError


def test_with_first_level_replaces_l1_and_recomputes_local_rates():
    """Hand case: SDCM cumulative (0.9, 0.95, 0.99); a simulated L1 of 0.8 gives local (0.8, 0.75, 0.8);
    an L1 of 0.97 lifts L2 to 0.97 (no level serves fewer accesses than the one above)."""
    import pandas as pd

    from analysis.hitrates.rates import COLUMNS, with_first_level

    hits = pd.DataFrame([(1, lv, c, 0.0, c, 100) for lv, c in (("L1", 0.9), ("L2", 0.95), ("L3", 0.99))],
                        columns=COLUMNS)
    got = with_first_level(hits, {1: 0.8})
    assert got["cumulative_hit_rate"].tolist() == pytest.approx([0.8, 0.95, 0.99])
    assert got["local_hit_rate"].tolist() == pytest.approx([0.8, 0.75, 0.8])
    assert got["level_hit_rate"].tolist() == pytest.approx([0.8, 0.95, 0.99])
    lifted = with_first_level(hits, {1: 0.97})
    assert lifted["cumulative_hit_rate"].tolist() == pytest.approx([0.97, 0.97, 0.99])
    with pytest.raises(InputError, match="none for 1 cores"):
        with_first_level(hits, {2: 0.5})
