"""describe's quantiles and bootstrap CIs are numpy's to the bit (np.quantile is the oracle),
and a summary no longer imports numpy.ma."""

from __future__ import annotations

import json
import struct
import subprocess
import sys

import numpy as np
import pytest

from app.eval.stats import describe as d

_QS = [(0.1, 0.5, 0.9), (0.025, 0.975), (0.0, 1.0), (0.5,), (0.999, 0.001, 0.25)]


def _bits(xs: list[float]) -> list[bytes]:
    return [struct.pack("<d", float(x)) for x in xs]


def _samples() -> list[np.ndarray]:
    rng = np.random.default_rng(20261205)
    out: list[np.ndarray] = []
    for n in [*range(1, 301), 1000]:
        kind = n % 5
        if kind == 0:
            out.append(rng.normal(0.5, 0.3, size=n))
        elif kind == 1:
            out.append(rng.integers(1, 6, size=n).astype(float))  # judge scores: ties
        elif kind == 2:
            out.append(rng.choice([0.0, -0.0, 1.0], size=n))  # both zeros, which lands where
        elif kind == 3:
            out.append(rng.exponential(1e-5, size=n))  # costs
        else:
            out.append(np.full(n, 0.37))  # all equal
    out += [np.array([np.inf, 1.0, -np.inf, 2.0]), np.array([1.0, np.nan, 0.5]), np.array([-0.0])]
    out += [np.array([np.inf] * 3), np.array([-0.0, 0.0] * 65), rng.normal(size=129)]
    return out


def test_quantiles_are_np_quantile_to_the_bit() -> None:
    checked = 0
    for i, arr in enumerate(_samples()):
        qs = _QS[i % len(_QS)]
        with np.errstate(invalid="ignore"):
            want = np.quantile(arr, list(qs)).tolist()
        got = d.quantiles(arr, qs)
        assert _bits(got) == _bits(want), (len(arr), qs, got, want)
        assert not np.shares_memory(arr, np.asarray(got))  # the input is not reordered
        checked += 1
    assert checked > 300


def test_quantiles_leave_the_input_alone_and_refuse_nonsense() -> None:
    arr = np.array([3.0, 1.0, 2.0])
    d.quantiles(arr, (0.5,))
    assert arr.tolist() == [3.0, 1.0, 2.0]
    with pytest.raises(ValueError):
        d.quantiles(arr, (1.5,))
    with pytest.raises(ValueError):
        d.quantiles(np.array([]), (0.5,))


@pytest.mark.parametrize("n", [2, 129, 200])
def test_bootstrap_ci_is_np_quantile_of_one_big_draw(n: int) -> None:
    """The CI with the default chunk size equals np.quantile over the means of one
    (resamples, n) index matrix, and over the level draws, bit for bit."""
    rng = np.random.default_rng(n)
    cont = rng.normal(0.4, 0.1, size=n)  # > 64 levels from n = 65: index resampling
    seed = d.stable_seed(7, "latency_s")
    if n > d.MULTINOMIAL_MAX_LEVELS:
        idx = np.random.default_rng(seed).integers(0, n, size=(2000, n))
        want = np.quantile(cont[idx].mean(axis=1), [0.025, 0.975]).tolist()
        assert _bits(d.bootstrap_ci(cont.tolist(), seed=seed) or []) == _bits(want)
    few = rng.integers(1, 6, size=n).astype(float)
    levels, counts = np.unique(few, return_counts=True)
    draws = np.random.default_rng(seed).multinomial(n, counts / n, size=2000)
    want = np.quantile((draws @ levels) / n, [0.025, 0.975]).tolist()
    assert _bits(d.bootstrap_ci(few.tolist(), seed=seed) or []) == _bits(want)


def test_describe_quantiles_are_numpys() -> None:
    values = np.random.default_rng(3).gamma(2.0, 0.2, size=200)
    got = d.describe(values.tolist(), seed=1)
    want = np.quantile(values, [0.1, 0.5, 0.9]).tolist()
    assert _bits([got["p10"], got["median"], got["p90"]]) == _bits(want)


def test_a_summary_does_not_import_numpy_ma() -> None:
    """np.quantile's np.unique imports numpy.ma (1.9 MB at the peer job's peak)."""
    code = (
        "import sys, json\n"
        "from app.eval.stats.describe import describe\n"
        "describe([0.1 * i for i in range(100)], unit='ratio 0-1', seed=3)\n"
        "describe([float(i % 3) for i in range(100)], seed=3)\n"
        "print(json.dumps(['numpy' in sys.modules, 'numpy.ma' in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [True, False]
