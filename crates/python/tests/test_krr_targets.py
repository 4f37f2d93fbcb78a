"""KernelRidge as scikit-learn users call it (issue 23, Deliver 3): ``sample_weight`` and 2-D
``y``, against scikit-learn's ``KernelRidge`` to 1e-10 and against dense closed forms, on data
with an outlier row, duplicate rows and a constant column; bad weights and targets raise."""

import io
import os

import numpy as np
import pytest
from sklearn.kernel_ridge import KernelRidge as SkKernelRidge
from sklearn.metrics.pairwise import rbf_kernel

import stolr

GAMMA = 0.125  # σ = 2 exactly


def _data(n=70, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    X[:, 3] = 0.7  # a constant column
    X[10:15] = X[0:5]  # duplicate rows
    X[-1, 0] = 8.0  # an outlier row
    Y = np.column_stack([np.sin(X[:, 0]) + 0.1 * rng.normal(size=n), 40.0 + X[:, 0] * X[:, 1], X[:, 2] ** 2])
    Y[10:15] = Y[0:5]
    Y[-1, 0] = 50.0
    w = rng.uniform(0.0, 2.0, size=n)
    w[[3, 7]] = 0.0
    Xt = rng.normal(size=(25, 4))
    Xt[:, 3] = 0.7
    return X, Y, w, Xt


def _close(a, b, tol=1e-10):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    scale = max(1.0, np.max(np.abs(b)))
    err = np.max(np.abs(a - b)) / scale
    assert err < tol, err


@pytest.mark.parametrize("targets", ["1d", "2d", "2d-one-column"])
def test_sample_weight_and_2d_y_match_scikit_learn(targets):
    X, Y, w, Xt = _data()
    y = {"1d": Y[:, 0], "2d": Y, "2d-one-column": Y[:, :1]}[targets]
    for sw in (w, None):
        ours = stolr.KernelRidge(alpha=0.5, gamma=GAMMA, fit_intercept=False).fit(X, y, sample_weight=sw)
        ref = SkKernelRidge(alpha=0.5, kernel="rbf", gamma=GAMMA).fit(X, y, sample_weight=sw)
        assert ours.predict(Xt).shape == ref.predict(Xt).shape
        _close(ours.predict(Xt), ref.predict(Xt))
        _close(ours.predict(X), ref.predict(X))
        assert ours.dual_coef_.shape == ref.dual_coef_.shape
        _close(ours.dual_coef_, ref.dual_coef_)


def test_weights_change_the_fit_and_zero_weights_drop_rows():
    X, Y, w, Xt = _data()
    ours = stolr.KernelRidge(alpha=0.5, gamma=GAMMA, fit_intercept=False).fit(X, Y[:, 0], sample_weight=w)
    plain = stolr.KernelRidge(alpha=0.5, gamma=GAMMA, fit_intercept=False).fit(X, Y[:, 0])
    assert np.max(np.abs(ours.predict(Xt) - plain.predict(Xt))) > 1e-3
    # A zero weight removes the row: the same as fitting without rows 3 and 7 (scikit-learn too).
    keep = w > 0
    dropped = SkKernelRidge(alpha=0.5, kernel="rbf", gamma=GAMMA).fit(X[keep], Y[keep, 0], sample_weight=w[keep])
    _close(ours.predict(Xt), dropped.predict(Xt))
    assert np.all(ours.dual_coef_[~keep] == 0.0)


def test_weighted_intercept_is_the_weighted_bordered_system():
    X, Y, w, Xt = _data(seed=1)
    ours = stolr.KernelRidge(alpha=0.3, gamma=GAMMA).fit(X, Y, sample_weight=w)
    n = X.shape[0]
    K = rbf_kernel(X, X, gamma=GAMMA)
    # Σ wᵢ (yᵢ − (Kα)ᵢ − b)² + λ αᵀKα: W(y − Kα − b1) = λα and 1ᵀα = 0.
    A = np.block([[np.diag(w) @ K + 0.3 * np.eye(n), w[:, None]], [np.ones((1, n)), np.zeros((1, 1))]])
    sol = np.linalg.solve(A, np.vstack([w[:, None] * Y, np.zeros((1, 3))]))
    ref = rbf_kernel(Xt, X, gamma=GAMMA) @ sol[:n] + sol[n]
    _close(ours.predict(Xt), ref, 1e-9)
    _close(ours.dual_coef_, sol[:n], 1e-9)
    # A constant added to one output moves only its predictions, by that constant.
    shifted = Y.copy()
    shifted[:, 1] += 1e4
    moved = stolr.KernelRidge(alpha=0.3, gamma=GAMMA).fit(X, shifted, sample_weight=w).predict(Xt)
    _close(moved[:, 1] - 1e4, ours.predict(Xt)[:, 1], 1e-9)


@pytest.mark.parametrize("intercept", [True, False])
def test_weighted_nystrom_is_the_weighted_closed_form(intercept):
    X, Y, w, Xt = _data(n=200, seed=2)
    ours = stolr.KernelRidge(solver="nystrom", n_landmarks=30, alpha=0.3, gamma=GAMMA, fit_intercept=intercept,
                             random_state=3).fit(X, Y, sample_weight=w)
    centres = np.load(io.BytesIO(ours.model_))["centers"]
    knm, kmm = rbf_kernel(X, centres, gamma=GAMMA), rbf_kernel(centres, centres, gamma=GAMMA)
    if intercept:
        kbar, ybar = w @ knm / w.sum(), w @ Y / w.sum()
    else:
        kbar, ybar = np.zeros(knm.shape[1]), np.zeros(3)
    kc, yc = knm - kbar, Y - ybar
    beta = np.linalg.lstsq(kc.T @ (w[:, None] * kc) + 0.3 * kmm, kc.T @ (w[:, None] * yc), rcond=None)[0]
    ref = rbf_kernel(Xt, centres, gamma=GAMMA) @ beta + (ybar - kbar @ beta)
    _close(ours.predict(Xt), ref, 1e-8)
    assert ours.dual_coef_.shape == (30, 3)


@pytest.mark.parametrize("solver", ["krr", "krr-subset", "nystrom", "uniform", "slkl"])
def test_every_solver_takes_weights_and_several_outputs(solver):
    X, Y, w, Xt = _data(n=120, seed=4)
    kw = dict(solver=solver, n_landmarks=40, alpha=0.5, gamma=GAMMA, nu=0.005, random_state=2)
    both = stolr.KernelRidge(**kw).fit(X, Y, sample_weight=w).predict(Xt)
    assert both.shape == (25, 3)
    for k in range(3):
        alone = stolr.KernelRidge(**kw).fit(X, Y[:, k], sample_weight=w).predict(Xt)
        assert alone.shape == (25,)
        _close(both[:, k], alone, 1e-9)


def test_one_dimensional_y_without_weights_keeps_its_bits():
    X, Y, _, Xt = _data(seed=5)
    for solver in ["krr", "nystrom", "slkl"]:
        kw = dict(solver=solver, n_landmarks=30, alpha=0.5, gamma=GAMMA, nu=0.01, random_state=1)
        one = stolr.KernelRidge(**kw).fit(X, Y[:, 0]).predict(Xt)
        column = stolr.KernelRidge(**kw).fit(X, Y[:, :1]).predict(Xt)
        assert column.shape == (25, 1)
        assert np.array_equal(one, column[:, 0])


def test_a_multi_output_model_loads_with_its_outputs(tmp_path):
    X, Y, w, Xt = _data(seed=6)
    ours = stolr.KernelRidge(alpha=0.5, gamma=GAMMA).fit(X, Y, sample_weight=w)
    path = os.path.join(tmp_path, "model.npz")
    with open(path, "wb") as f:
        f.write(ours.model_)
    loaded = stolr.load(path)
    assert np.array_equal(loaded.predict(Xt), ours.predict(Xt))


@pytest.mark.parametrize("bad,match", [
    (lambda w: -w, "sample_weight"),
    (lambda w: np.where(np.arange(w.size) == 4, np.nan, w), "sample_weight"),
    (lambda w: np.zeros_like(w), "sample_weight"),
    (lambda w: w[:-1], "sample weights"),
    (lambda w: np.column_stack([w, w]), "sample_weight"),
])
@pytest.mark.parametrize("solver", ["krr", "nystrom", "slkl"])
def test_bad_weights_raise(bad, match, solver):
    X, Y, w, _ = _data()
    w = w + 0.1  # all positive, so that negating makes every one negative
    with pytest.raises(ValueError, match=match):
        stolr.KernelRidge(solver=solver, n_landmarks=20).fit(X, Y, sample_weight=bad(w))


def test_bad_targets_raise():
    X, Y, _, _ = _data()
    with pytest.raises(ValueError):
        stolr.KernelRidge().fit(X, Y[:-1])
    with pytest.raises(ValueError):
        stolr.KernelRidge().fit(X, np.zeros((X.shape[0], 0)))
    bad = Y.copy()
    bad[5, 2] = np.nan
    with pytest.raises(ValueError):
        stolr.KernelRidge().fit(X, bad)
