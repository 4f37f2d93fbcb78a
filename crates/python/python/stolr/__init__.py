"""Stolr: stochastic low-rank learning as scikit-learn estimators.

Kernel PCA, PCA and kernel ridge regression whose memory stays linear in the number of samples.
Every estimator follows scikit-learn's conventions: ``__init__`` stores parameters only, ``fit``
returns ``self``, fitted attributes end in ``_``. A fitted estimator keeps its model as the bytes
of a Stolr model file (the ``model.npz`` the ``stolr`` command writes), so it pickles through
that format and ``stolr.load(path)`` reads a model the CLI saved.
"""

import warnings

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from . import _core

__all__ = ["KernelPCA", "PCA", "StreamingPCA", "KernelRidge", "load"]


def _seed(random_state):
    if random_state is None:
        return 0
    if isinstance(random_state, (int, np.integer)):
        return int(random_state) & 0xFFFFFFFFFFFFFFFF
    return int(np.random.RandomState(random_state).randint(0, 2**31 - 1))


def _is_int(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _count(name, v):
    """A parameter that must be a positive integer: TypeError for a non-integer, ValueError for
    a value below 1 (the CLI's refusal of the same option)."""
    if not _is_int(v):
        raise TypeError(f"{name} must be an integer, got {type(v).__name__}")
    if v < 1:
        raise ValueError(f"{name} must be at least 1, got {v}")
    if v > 2**63 - 1:
        raise ValueError(f"{name} = {v} is too large")
    return int(v)


def _is_auto(v):
    return isinstance(v, str) and v == "auto"


def _gamma(gamma, n_features):
    return 1.0 / n_features if gamma is None else float(gamma)


class _Model:
    """What every estimator shares: its fitted model as the bytes of a Stolr model file, which
    is what pickling stores and what ``save`` writes (the file ``stolr transform`` and
    ``stolr predict`` read)."""

    def save(self, path):
        """Writes the fitted model to ``path`` (a ``model.npz`` the CLI reads)."""
        check_is_fitted(self, "model_")
        with open(path, "wb") as f:
            f.write(self.model_)


class KernelPCA(TransformerMixin, BaseEstimator, _Model):
    """Kernel PCA by SKPCA (stochastic proximal gradient), Nyström, KHA or the exact solver
    (``solver="exact"``: the dense kernel matrix when it fits, ``"exact-matrix-free"``: never).

    ``fit`` runs the library's kernel PCA job, the one ``stolr kpca`` runs: the same data,
    parameters and ``random_state`` (the CLI's ``--seed``) give the same bits (docs/front-ends.md
    lists the defaults that differ by convention: ``center=True`` here, ``gamma`` for ``--sigma``).

    Eigenvalues are in nonincreasing order. ``transform`` projects new rows on the kernel
    principal axes, scaled as scikit-learn's ``KernelPCA.transform``.

    ``memory_limit`` (bytes, or a size such as ``"2G"``; default 80 % of the memory available)
    bounds every allocation whose size follows from the data or a parameter: a fit that would
    exceed it raises ``MemoryError`` before doing the work.
    """

    def __init__(self, n_components=None, kernel="rbf", gamma=None, degree=3, coef0=1.0,
                 solver="exact", center=True, tau=None, n_iter=1000, n_features=50,
                 sampler="rff", n_landmarks=500, memory_limit=None, random_state=None, verbose=False):
        self.verbose = verbose
        self.memory_limit = memory_limit
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.solver = solver
        self.center = center
        self.tau = tau
        self.n_iter = n_iter
        self.n_features = n_features
        self.sampler = sampler
        self.n_landmarks = n_landmarks
        self.random_state = random_state

    def fit(self, X, y=None):
        X = validate_data(self, X, dtype=np.float64, ensure_min_samples=2)
        n_components = self.n_components if self.n_components is not None else min(X.shape)
        # As KernelRidge: at most one landmark per training row (the default 500 on fewer rows).
        n_landmarks = min(_count("n_landmarks", self.n_landmarks), X.shape[0])
        model, values, vectors, warns = _core.fit_kernel_pca(
            np.ascontiguousarray(X), n_components, self.kernel, _gamma(self.gamma, X.shape[1]),
            int(self.degree), float(self.coef0), self.solver, bool(self.center), self.tau,
            _count("n_iter", self.n_iter), _count("n_features", self.n_features), self.sampler, n_landmarks,
            _seed(self.random_state), bool(self.verbose),
            None if self.memory_limit is None else str(self.memory_limit))
        # The fit's warnings: fewer eigenpairs than n_components (the kernel's numerical rank),
        # or KHA stopped before its residual test passed. Without n_components, the pairs that
        # exist are what was asked for.
        for message in warns:
            if self.n_components is not None or "requested" not in message:
                warnings.warn(message, RuntimeWarning, stacklevel=2)
        self.model_ = model
        self.eigenvalues_ = values
        # Eigenvectors (n, r) of the (centred) training kernel matrix, as the CLI writes them.
        self.eigenvectors_ = vectors
        return self

    def transform(self, X):
        check_is_fitted(self, "model_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return _core.transform(self.model_, np.ascontiguousarray(X))


class PCA(TransformerMixin, BaseEstimator, _Model):
    """PCA by SVRG with Barzilai–Borwein steps, VR-PCA or the exact solver; centred by default.

    Fitted attributes as scikit-learn's ``PCA``: ``components_`` (n_components, n_features),
    ``explained_variance_`` (non-increasing), ``explained_variance_ratio_`` (each component's
    share of the total variance of the centred rows; summing to at most 1) and ``mean_``.
    """

    def __init__(self, n_components=2, solver="exact", center=True, random_state=None, verbose=False):
        self.verbose = verbose
        self.n_components = n_components
        self.solver = solver
        self.center = center
        self.random_state = random_state

    def fit(self, X, y=None):
        X = validate_data(self, X, dtype=np.float64, ensure_min_samples=2)
        self.model_ = _core.fit_pca(np.ascontiguousarray(X), int(self.n_components), self.solver,
                                    bool(self.center), _seed(self.random_state), bool(self.verbose))
        self.components_, self.explained_variance_, self.mean_ = _core.pca_attributes(self.model_)
        self.explained_variance_ratio_ = _core.pca_explained_variance_ratio(self.model_)
        return self

    def transform(self, X):
        check_is_fitted(self, "model_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return _core.transform(self.model_, np.ascontiguousarray(X))

    def inverse_transform(self, X):
        check_is_fitted(self, "model_")
        return _core.inverse_transform(self.model_, np.ascontiguousarray(X, dtype=np.float64))


class StreamingPCA(TransformerMixin, BaseEstimator, _Model):
    """Streaming PCA by capped MSG (default), MSG, incremental PCA or Oja ([MSG]): one pass
    over batches of rows with ``partial_fit``. The solvers need ``1 <= n_components < n_features``.

    The rows are not centred: as in [MSG], the components are the top eigenvectors of the
    second moment E[x xᵀ] (scikit-learn's IncrementalPCA centres with a running mean; centre the
    stream beforehand for the same subspace). The solvers keep no rows, so after ``partial_fit``
    ``components_`` (n_components, n_features) and ``explained_variance_`` (non-increasing) are the
    Rayleigh–Ritz pairs of the current subspace on the latest batch; ``fit`` computes them on
    all of ``X``. ``batch_size`` is kept for compatibility and changes nothing (every
    solver takes the rows one at a time)."""

    def __init__(self, n_components=1, solver="capped-msg", eta_scale=0.5, cap=None, batch_size=None,
                 random_state=None):
        self.n_components = n_components
        self.solver = solver
        self.eta_scale = eta_scale
        self.cap = cap
        self.batch_size = batch_size
        self.random_state = random_state

    def _check_params(self):
        if self.batch_size is not None and not (_is_int(self.batch_size) and self.batch_size >= 1):
            raise ValueError(f"batch_size must be a positive integer or None, got {self.batch_size!r}")
        if not _is_int(self.n_components):
            raise TypeError(f"n_components must be an integer, got {type(self.n_components).__name__}")
        if self.cap is not None and not (_is_int(self.cap) and self.cap >= 1):
            raise ValueError(f"cap must be a positive integer or None, got {self.cap!r}")

    def partial_fit(self, X, y=None):
        first = not hasattr(self, "state_")
        self._check_params()
        X = validate_data(self, X, dtype=np.float64, reset=first)
        if first:
            if not 1 <= int(self.n_components) < X.shape[1]:
                raise ValueError(f"n_components={self.n_components} must be at least 1 and below the "
                                 f"number of features (n_features = {X.shape[1]})")
            self.state_ = _core.StreamingState(self.solver, X.shape[1], int(self.n_components),
                                               float(self.eta_scale), self.cap, _seed(self.random_state))
        self.state_.partial_fit(np.ascontiguousarray(X))
        self.model_ = self.state_.model(np.ascontiguousarray(X))
        self.components_, self.explained_variance_, _ = _core.pca_attributes(self.model_)
        self.n_samples_seen_ = self.state_.samples_seen()
        return self

    def fit(self, X, y=None):
        """One pass of the solver over the rows of ``X`` in order, then Rayleigh–Ritz on all of
        ``X``: the library's streaming job, the fit ``stolr pca --solver ...`` runs (the same
        seed gives the same components). ``partial_fit`` afterwards continues the stream."""
        self._check_params()
        X = validate_data(self, X, dtype=np.float64, ensure_min_samples=2)
        for attr in ("state_", "model_"):
            if hasattr(self, attr):
                delattr(self, attr)
        if not 1 <= int(self.n_components) < X.shape[1]:
            raise ValueError(f"n_components={self.n_components} must be at least 1 and below the "
                             f"number of features (n_features = {X.shape[1]})")
        self.state_, self.model_ = _core.fit_streaming(
            np.ascontiguousarray(X), self.solver, int(self.n_components), float(self.eta_scale), self.cap,
            _seed(self.random_state))
        self.components_, self.explained_variance_, _ = _core.pca_attributes(self.model_)
        self.n_samples_seen_ = self.state_.samples_seen()
        return self

    def transform(self, X):
        check_is_fitted(self, "model_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return _core.transform(self.model_, np.ascontiguousarray(X))

    def __getstate__(self):
        # The solver's whole state travels as the bytes of a Stolr file, so that partial_fit
        # continues after unpickling (n_samples_seen_ and the step-size schedule included).
        state = super().__getstate__() if hasattr(super(), "__getstate__") else self.__dict__.copy()
        state = dict(state)
        if "state_" in state:
            state["state_"] = state["state_"].to_bytes()
        return state

    def __setstate__(self, state):
        state = dict(state)
        if isinstance(state.get("state_"), (bytes, bytearray)):
            state["state_"] = _core.StreamingState.from_bytes(bytes(state["state_"]))
        if hasattr(super(), "__setstate__"):
            super().__setstate__(state)
        else:
            self.__dict__.update(state)


class KernelRidge(RegressorMixin, BaseEstimator, _Model):
    """Kernel ridge regression by SLKL (sparse rank-1 Nyström kernels), Nyström KRR or a baseline.

    ``solver``: ``krr`` (all n points), ``nystrom`` (ridge over ``n_landmarks`` landmark kernel
    functions, memory O(M² + n·d)), ``slkl`` (sparse: few centres, cheap predictions), ``krr-subset``
    or ``uniform``. ``fit_intercept`` (default True, as scikit-learn's ``Ridge``) fits
    ``f(x) = Σ_j c_j k(x, z_j) + b`` with the intercept ``b`` an unpenalized model term (exact KRR:
    the bordered system; Nyström: the kernel columns centred over the training rows, as
    ``Nystroem`` + ``Ridge``; SLKL: centred rank-1 columns); False fits no ``b`` ([SLKL]'s
    setting). ``nu`` (``slkl`` and ``uniform``): the sparsity penalty ν > 0, or ``"auto"`` for ν
    chosen by 5-fold cross-validation on the training rows, as ``stolr krr --nu auto`` does (the
    same job: the same seed gives the same ν and model).

    ``fit(X, y, sample_weight=None)``: ``y`` of shape ``(n,)`` or ``(n, t)`` (``t`` outputs fitted
    on one factorization for ``krr``/``krr-subset``/``nystrom`` direct; ``slkl`` and ``uniform``
    fit each output on the same landmarks with their own kernel weights); ``predict`` returns
    ``(m,)`` for a 1-D ``y`` and ``(m, t)`` for a 2-D one, as scikit-learn does.
    ``sample_weight`` (length n, finite, ≥ 0, not all zero) weights the squared errors:
    ``Σ w_i (y_i − f(x_i))² + alpha ‖f‖²`` (with ``solver="krr"`` and ``fit_intercept=False`` the
    same as scikit-learn's ``KernelRidge(alpha=alpha).fit(X, y, sample_weight=w)``); the intercept
    is fitted by weighted centring. ``dual_coef_``: the coefficients of the centres, ``(n,)`` or
    ``(n, t)`` for ``krr`` (scikit-learn's ``dual_coef_``), the landmark coefficients ``(M,)`` or
    ``(M, t)`` for the other solvers (SLKL with one output: its active landmarks; with several,
    every landmark in increasing row order).
    """

    def __init__(self, solver="krr", alpha=1.0, kernel="rbf", gamma=None, n_landmarks=200,
                 nu=0.01, fit_intercept=True, random_state=None, verbose=False):
        self.fit_intercept = fit_intercept
        self.verbose = verbose
        self.solver = solver
        self.alpha = alpha
        self.kernel = kernel
        self.gamma = gamma
        self.n_landmarks = n_landmarks
        self.nu = nu
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    def fit(self, X, y, sample_weight=None):
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True, multi_output=True)
        n_landmarks = min(_count("n_landmarks", self.n_landmarks), X.shape[0])
        y = np.asarray(y, dtype=np.float64)
        self._y_ndim = y.ndim
        args = (self.solver, self.kernel, float(self.alpha), _gamma(self.gamma, X.shape[1]),
                n_landmarks, None if _is_auto(self.nu) else float(self.nu), bool(self.fit_intercept),
                _seed(self.random_state), bool(self.verbose))
        if y.ndim == 1 and sample_weight is None:
            self.model_ = _core.fit_kernel_ridge(np.ascontiguousarray(X), np.ascontiguousarray(y), *args)
        else:
            if sample_weight is not None:
                sample_weight = np.asarray(sample_weight, dtype=np.float64)
                if sample_weight.ndim == 0:
                    sample_weight = np.full(X.shape[0], float(sample_weight))
                if sample_weight.ndim != 1:
                    raise ValueError(f"sample_weight must be 1-D of length {X.shape[0]}, "
                                     f"got shape {sample_weight.shape}")
                if sample_weight.size and np.all(sample_weight == 0):  # scikit-learn's message
                    raise ValueError("Sample weights must contain at least one non-zero number "
                                     "(sample_weight: every weight is 0)")
                sample_weight = np.ascontiguousarray(sample_weight)
            y2 = y.reshape(-1, 1) if y.ndim == 1 else y
            self.model_ = _core.fit_kernel_ridge_targets(np.ascontiguousarray(X), np.ascontiguousarray(y2),
                                                         sample_weight, *args)
        coef, _ = _core.krr_coefficients(self.model_)
        self.dual_coef_ = coef[:, 0] if y.ndim == 1 else coef
        return self

    def predict(self, X):
        check_is_fitted(self, "model_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        ndim = getattr(self, "_y_ndim", None)
        if ndim is None:  # a loaded model: 2-D predictions for several outputs
            ndim = 2 if _core.krr_coefficients(self.model_)[1] > 1 else 1
        if ndim == 1:
            return _core.predict(self.model_, np.ascontiguousarray(X))
        return _core.predict_outputs(self.model_, np.ascontiguousarray(X))


def load(path):
    """A model file (or a ``stolr`` fit's ``--out`` folder) as a fitted estimator."""
    import os
    if os.path.isdir(path):
        path = os.path.join(path, "model.npz")
    with open(path, "rb") as f:
        data = f.read()
    kind = _core.model_kind(data)
    estimators = {"kernel-pca": KernelPCA, "pca": PCA, "kernel-ridge": KernelRidge}
    if kind not in estimators:
        what = "a solver checkpoint" if ("checkpoint" in kind or "state" in kind) else f"a '{kind}' file"
        raise ValueError(f"{path} is {what}, not a fitted model (kernel-pca, pca or kernel-ridge); "
                         "resume a checkpoint with the stolr command's --checkpoint")
    est = estimators[kind]()
    est.model_ = data
    if kind == "pca":
        est.components_, est.explained_variance_, est.mean_ = _core.pca_attributes(data)
        ratio = _core.pca_explained_variance_ratio(data)
        if ratio is not None:
            est.explained_variance_ratio_ = ratio
        est.n_features_in_ = est.components_.shape[1]
    return est
