"""Philox-4x32-10 in ``kernels_cpu._philox``: known answers, agreement with a Python twin, and
the distributions of the variates the fused kernels derive from it."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from kernels_cpu import _race as _fused
from tests._fused_helpers import (
    block_exponential,
    chi2_pvalue,
    ks_pvalue,
    philox4x32_10,
    step_uniforms,
)
from tests._fuzz import fuzz_settings

ALPHA = 1e-4  # significance of every statistical test (fixed seeds: outcomes are deterministic)

# Random123's kat_vectors for philox4x32_10: (counter, key, result)
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


@pytest.mark.parametrize("counter,key,expected", KAT)
def test_known_answers_compiled(counter, key, expected):
    assert _fused.philox4x32(counter, key) == expected


@pytest.mark.parametrize("counter,key,expected", KAT)
def test_known_answers_python_twin(counter, key, expected):
    assert philox4x32_10(counter, key) == expected


def test_fewer_rounds_differ():
    # the twin is not trivially right: 7 rounds give a different answer
    assert philox4x32_10((0, 0, 0, 0), (0, 0), rounds=7) != KAT[0][2]


word = st.integers(0, 2**32 - 1)


@fuzz_settings(300, deadline=None, derandomize=True)
@given(st.tuples(word, word, word, word), st.tuples(word, word))
def test_compiled_matches_twin(counter, key):
    assert _fused.philox4x32(counter, key) == philox4x32_10(counter, key)


def test_batch_words_match_twin():
    out = torch.full((37, 4), -1, dtype=torch.int64)
    _fused.philox_words(out, (0xFFFFFFF0, 5, 6, 7), (11, 12))
    for i in range(37):
        assert tuple(out[i].tolist()) == philox4x32_10(
            (((0xFFFFFFF0 + i) & 0xFFFFFFFF), 5, 6, 7), (11, 12)
        )


def test_bad_arguments():
    with pytest.raises(ValueError):
        _fused.philox4x32((0, 0, 0), (0, 0))
    with pytest.raises(ValueError):
        _fused.philox4x32((0, 0, 0, 2**32), (0, 0))
    with pytest.raises(ValueError, match="out"):
        _fused.philox_words(torch.empty((3, 3), dtype=torch.int64), (0, 0, 0, 0), (0, 0))
    with pytest.raises(TypeError, match="out"):
        _fused.philox_words(torch.empty((3, 4), dtype=torch.int32), (0, 0, 0, 0), (0, 0))


def _words(n, key=(1234, 5678)):
    out = torch.empty((n // 4, 4), dtype=torch.int64)
    _fused.philox_words(out, (0, 0, 0, 0), key)
    return out.reshape(-1)


def test_words_uniform_bytes():
    # every byte of 400k words: 256 cells, chi-square against uniform
    w = _words(400_000).numpy().astype(np.uint32)
    for shift in (0, 8, 16, 24):
        counts = np.bincount((w >> shift) & 0xFF, minlength=256)
        assert chi2_pvalue(counts, np.ones(256)) > ALPHA


def test_uniform_float_range_and_ks():
    w = _words(200_000)
    u = _fused.variates(w, "u01_float").numpy()
    assert u.min() > 0 and u.max() <= 1
    assert ks_pvalue(u, lambda x: np.clip(x, 0, 1)) > ALPHA
    edges = torch.tensor([0, 2**32 - 1], dtype=torch.int64)
    lo, hi = _fused.variates(edges, "u01_float").tolist()
    assert lo == pytest.approx(2.0**-33) and hi == 1.0  # (0, 1]: top words round to 1


def test_uniform_open_range_and_ks():
    w = _words(200_000)
    u = _fused.variates(w, "u01_open").numpy()
    assert ks_pvalue(u, lambda x: np.clip(x, 0, 1)) > ALPHA
    lo, hi = _fused.variates(torch.tensor([0, 2**32 - 1], dtype=torch.int64), "u01_open").tolist()
    assert 0 < lo < 1e-9 and 0 < 1 - hi < 1e-9


def test_exponentials():
    w = _words(200_000)
    for kind in ("exp_open", "exp_float"):
        e = _fused.variates(w, kind).numpy()
        assert e.min() >= 0
        assert ks_pvalue(e, lambda x: 1 - np.exp(-x)) > ALPHA
        assert abs(e.mean() - 1) < 5 / math.sqrt(len(e))
    ends = _fused.variates(torch.tensor([0, 2**32 - 1], dtype=torch.int64), "exp_open").tolist()
    assert ends[0] == pytest.approx(-math.log(0.5 * 2.0**-32)) and 0 < ends[1] < 1e-9


def test_block_exponentials_are_exp1_and_match_twin():
    # the variates the race actually uses: one per (key, stream, position, block)
    e = torch.cat(
        [_fused.block_exponentials(0xDEADBEEF12345, s, j, 2000) for s in range(5) for j in range(4)]
    ).numpy()
    assert ks_pvalue(e, lambda x: 1 - np.exp(-x)) > ALPHA
    ref = _fused.block_exponentials(-5, 7, 3, 9).tolist()
    assert ref == [block_exponential(-5, 7, 3, b) for b in range(9)]


def test_step_uniforms_match_twin_and_are_uniform():
    assert _fused.step_uniforms(99, 3, 2) == step_uniforms(99, 3, 2)
    a = np.array([_fused.step_uniforms(42, s, j) for s in range(2000) for j in range(8)])
    for col in range(2):
        assert ks_pvalue(a[:, col], lambda x: np.clip(x, 0, 1)) > ALPHA
    assert abs(np.corrcoef(a[:, 0], a[:, 1])[0, 1]) < 5 / math.sqrt(len(a))
