import pytest
from scipy.stats import chi2

from app.analysis.chisquare import _LOWER_05, chi2_lower_05


@pytest.mark.parametrize("df", [*range(1, len(_LOWER_05) + 1), len(_LOWER_05) + 1, 200])
def test_chi2_lower_05_is_scipys_number_bit_for_bit(df: int) -> None:
    assert chi2_lower_05(df) == float(chi2.ppf(0.05, df))
