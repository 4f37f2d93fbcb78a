"""Stolr: stochastic low-rank learning as scikit-learn estimators.

Kernel PCA, PCA and kernel ridge regression whose memory stays linear in the number of samples.
Every estimator follows scikit-learn's conventions: ``__init__`` stores parameters only, ``fit``
returns ``self``, fitted attributes end in ``_``. A fitted estimator keeps its model as the bytes
of a Stolr model file (the ``model.npz`` the ``stolr`` command writes), so it pickles through
that format and ``stolr.load(path)`` reads a model the CLI saved.
"""

import json
import numbers
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, RegressorMixin, TransformerMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from . import _core
from . import _dask

__all__ = ["KernelPCA", "PCA", "StreamingPCA", "KernelRidge", "load", "IncrementalKernelPCA"]


def _seed(random_state):
    """The 64-bit seed of the library's generator for a scikit-learn ``random_state``.

    ``None``: seed 0 (every fit reproducible, unlike scikit-learn's global generator); an
    integer: that seed modulo 2⁶⁴, the bits the CLI's ``--seed`` gives; a
    ``np.random.RandomState`` or ``np.random.Generator``: one seed drawn from it (as
    scikit-learn's ``check_random_state`` hands the generator on, the generator advances, so
    two fits with the same generator object differ, and re-seeding it repeats them).
    """
    if random_state is None:
        return 0
    if isinstance(random_state, bool):
        raise ValueError(f"{random_state!r} cannot be used to seed a random_state")
    if isinstance(random_state, (int, np.integer)):
        return int(random_state) & 0xFFFFFFFFFFFFFFFF
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**63 - 1, dtype=np.int64))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2**63 - 1, dtype=np.int64))
    raise ValueError(f"{random_state!r} cannot be used to seed a random_state: give None, an integer, "
                     "a numpy.random.RandomState or a numpy.random.Generator")


#: The largest relative residual ``||C v - theta v|| / theta`` of a PCA component, with ``C``
#: the covariance of the training rows and ``theta = v' C v``, below which an iterative solver's
#: component counts as converged (``_core.pca_ritz_residuals``). Exact eigenvectors give about
#: 1e-15 times the condition number; a component 1 % off an eigenvector with a relative eigengap
#: of 10 % gives about 1e-3.
PCA_RESIDUAL_TOL = 1e-3


def _warn_pca_residuals(solver, residuals, tol, n_iter, stop=None, after=None,
                        remedy="raise max_iter, scale the features (e.g. StandardScaler) or use solver='exact'"):
    """ConvergenceWarning when the components of an iterative PCA fit are not eigenvectors of
    the training covariance to ``tol`` (relative residual). The solver's own stop reason
    (``stop``) is not the test: SVRG-PCA's gradient test passes on unscaled data while the small
    components are still wrong, and can fail on tiny data whose components are exact."""
    residuals = np.asarray(residuals, dtype=np.float64)
    bad = np.flatnonzero(~(residuals <= tol))
    if bad.size:
        worst = int(bad[np.argmax(residuals[bad])])
        after = f"after {n_iter} epochs" if after is None else after
        warnings.warn(
            f"{solver} has not converged {after}: component(s) {', '.join(str(j) for j in bad)} "
            f"are not eigenvectors of the training covariance (largest relative residual "
            f"||C v - theta v|| / theta = {residuals[worst]:.3e} at component {worst}, tolerance {tol:g}); "
            f"{remedy}",
            ConvergenceWarning, stacklevel=3)


def _warning_category(message):
    """The warning class of a fit's message: ``ConvergenceWarning`` for an iterative solver that
    stopped before its convergence test passed, ``RuntimeWarning`` otherwise."""
    return ConvergenceWarning if "not converged" in message else RuntimeWarning


def _pca_components(n_components, n_samples, n_features):
    """``n_components`` as scikit-learn's PCA reads it: ``None`` is ``min(n, d)``, an integer
    ``1..min(n, d)``, a float in (0, 1) a share of variance (returned as the float)."""
    limit = min(n_samples, n_features)
    if n_components is None:
        return limit
    if _is_int(n_components):
        if n_components < 1:
            raise ValueError(f"n_components must be at least 1, got {n_components}")
        return int(n_components)  # above min(n, d): the library names the binding dimension
    if isinstance(n_components, numbers.Real) and not isinstance(n_components, bool):
        if 0.0 < float(n_components) < 1.0:
            return float(n_components)
        raise ValueError(f"n_components={n_components} as a float must be strictly between 0 and 1 "
                         "(a share of the variance)")
    raise TypeError(f"n_components must be None, an integer or a float in (0, 1), got {type(n_components).__name__}")


def _rank_for_share(ratio, share):
    """The smallest number of components whose explained variance ratios sum to at least
    ``share`` (scikit-learn's rule)."""
    cumulative = np.cumsum(ratio)
    return int(min(np.searchsorted(cumulative, share, side="right") + 1, len(ratio)))


def _whiten_scale(explained_variance):
    """The divisor of whitened projections, ``sqrt(explained_variance_)`` (zero variances
    left as they are)."""
    scale = np.sqrt(np.asarray(explained_variance, dtype=np.float64))
    return np.where(scale > 0, scale, 1.0)


class _FeatureNamesOut(ClassNamePrefixFeaturesOutMixin):
    """``get_feature_names_out`` as scikit-learn names a transformer's outputs: the lowercase
    class name and the index (``pca0``, ``kernelpca0``, ``streamingpca0``), so that
    ``set_output(transform="pandas")`` works."""

    @property
    def _n_features_out(self):
        for attr in ("components_", "eigenvalues_"):
            if hasattr(self, attr):
                return getattr(self, attr).shape[0]
        return None


# Dense rows are taken as float64 or float32; float32 stays float32 (half the memory): the library
# converts it exactly a block of rows at a time where it computes, so a float32 array gives the
# results of the same values in float64, bit for bit. Other dtypes are converted to float64.
_DTYPES = [np.float64, np.float32]


def _rows(X):
    """``X`` as ``_core`` takes rows: a C-contiguous float64 or float32 array, or for a ``scipy.sparse``
    matrix its CSR parts ``(indptr, indices, data, shape)`` (int64 indices, float64 values),
    never densified. A CSR matrix in canonical form (sorted, no duplicate entries) of float64 is
    passed without copying its values; another is converted (a copy) first."""
    import scipy.sparse as sp
    if not sp.issparse(X):
        return np.ascontiguousarray(X)
    X = X.tocsr()
    # Pointers and indices checked before scipy's own routines read them (a corrupt indptr
    # would make sum_duplicates write out of bounds).
    X.check_format(full_check=True)
    if not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()
    return (X.indptr.astype(np.int64, copy=False), X.indices.astype(np.int64, copy=False),
            X.data.astype(np.float64, copy=False), X.shape)


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


def _landmark_kwargs(landmarks):
    """The ``landmarks=`` of ``KernelPCA`` and ``KernelRidge`` as ``_core`` takes them:
    ``{}`` for ``None`` (landmarks drawn), ``landmark_indices`` (int64, ``(m,)``) for a 1-D
    integer array of training-row indices, ``landmark_rows`` (float64, ``(m, d)``, C order) for a
    2-D array of rows (a ``scipy.sparse`` matrix is densified: ``m`` rows only). ValueError for
    anything else (a 1-D float or boolean array, a negative index, 0-D or 3-D arrays); the fit
    checks them against the training rows (index range, repeats, width, finite values)."""
    if landmarks is None:
        return {}
    if hasattr(landmarks, "toarray"):
        landmarks = landmarks.toarray()
    a = np.asarray(landmarks)
    if a.ndim == 1:
        if a.dtype == bool or not np.issubdtype(a.dtype, np.integer):
            raise ValueError(f"1-D landmarks must be integer training-row indices, got dtype {a.dtype}")
        if a.size and a.min() < 0:
            raise ValueError(f"landmark indices must be >= 0, got {int(a.min())}")
        return {"landmark_indices": np.ascontiguousarray(a, dtype=np.int64)}
    if a.ndim == 2:
        if a.dtype == bool or not np.issubdtype(a.dtype, np.number):
            raise ValueError(f"2-D landmarks must be numeric rows (m, n_features), got dtype {a.dtype}")
        return {"landmark_rows": np.ascontiguousarray(a, dtype=np.float64)}
    raise ValueError("landmarks must be a 1-D array of training-row indices or a 2-D array of rows "
                     f"(m, n_features), got shape {a.shape}")


def _set_preimage_attributes(est, loaded=False):
    """``dual_coef_`` and ``X_transformed_fit_`` (and, for a ``loaded`` model, the parameters
    ``fit_inverse_transform`` and ``alpha``) from a kernel PCA model's pre-image map; removed when
    it has none."""
    preimage = _core.kernel_pca_preimage(est.model_)
    if preimage is None:
        for attr in ("dual_coef_", "X_transformed_fit_"):
            if hasattr(est, attr):
                delattr(est, attr)
        return
    alpha, embedding, dual_coef = preimage
    if loaded:
        est.fit_inverse_transform = True
        est.alpha = alpha
    est.X_transformed_fit_ = embedding
    est.dual_coef_ = dual_coef


def _is_precomputed(est):
    """Whether ``est.kernel`` is ``"precomputed"``: ``X`` is a Gram matrix (fit) or a cross
    kernel (transform, predict)."""
    kernel = getattr(est, "kernel", None)
    return isinstance(kernel, str) and kernel == "precomputed"


def _gram_kernel(est):
    """Whether ``est`` is fitted through a Gram matrix: ``kernel="precomputed"`` or a callable
    kernel (whose Gram matrix is evaluated here, then the precomputed path runs)."""
    return _is_precomputed(est) or callable(getattr(est, "kernel", None))


def _check_gram_solver(est, exact):
    """``ValueError`` unless ``est.solver`` is the exact solver ``exact``: only it takes a Gram
    matrix (the others evaluate their kernel on rows: landmarks, features, samples)."""
    if est.solver != exact:
        what = "kernel='precomputed'" if _is_precomputed(est) else "a callable kernel"
        raise ValueError(f"{what} needs solver='{exact}' (the exact solver, which takes the Gram matrix); "
                         f"solver='{est.solver}' evaluates its kernel on the rows and cannot use it")


def _callable_kernel_matrix(kernel, X, Y=None):
    """The kernel matrix of the callable ``kernel`` (scikit-learn's convention: ``kernel(x, y)``
    of two 1-D rows returns a number): ``K[i, j] = kernel(X[i], Y[j])``, shape
    ``(len(X), len(Y))``. With ``Y`` None the Gram matrix of ``X``: the pairs ``i <= j`` are
    evaluated and mirrored, so it is exactly symmetric (as scikit-learn's ``pairwise_kernels``).
    ``n²`` Python calls (``n(n + 1)/2`` for a Gram matrix)."""
    symmetric = Y is None
    Y = X if symmetric else Y
    K = np.empty((X.shape[0], Y.shape[0]), dtype=np.float64)
    for i in range(X.shape[0]):
        for j in range(i if symmetric else 0, Y.shape[0]):
            value = kernel(X[i], Y[j])
            try:
                K[i, j] = value
            except (TypeError, ValueError):
                raise ValueError(f"the kernel callable must return a number for two rows (1-D arrays), "
                                 f"got {type(value).__name__} {np.shape(value)}") from None
            if symmetric:
                K[j, i] = K[i, j]
    return K


def _gram_and_rows(est, X):
    """The Gram matrix of a fit through a Gram matrix: ``X`` itself for ``kernel="precomputed"``
    (the training Gram matrix, n × n), else the callable's Gram matrix of the rows ``X``, which
    are kept as ``X_fit_`` (scikit-learn's name) to evaluate cross kernels later."""
    if _is_precomputed(est):
        if hasattr(est, "X_fit_"):
            del est.X_fit_
        return np.ascontiguousarray(X)
    est.X_fit_ = X
    return _callable_kernel_matrix(est.kernel, X)


def _cross_kernel(est, X):
    """The cross kernel of new samples ``X`` with the training samples: ``X`` itself for
    ``kernel="precomputed"`` (n_test × n_train), else the callable on the rows of ``X`` and
    ``X_fit_``."""
    if _is_precomputed(est):
        return np.ascontiguousarray(X)
    return _callable_kernel_matrix(est.kernel, X, est.X_fit_)


def _drop(est, *attrs):
    """Removes fitted attributes a previous fit of another kind left."""
    for attr in attrs:
        if hasattr(est, attr):
            delattr(est, attr)


class _Model:
    """What every estimator shares: its fitted model as the bytes of a Stolr model file, which
    is what pickling stores and what ``save`` writes (the file ``stolr transform`` and
    ``stolr predict`` read)."""

    def save(self, path):
        """Writes the fitted model to ``path`` (a ``model.npz`` the CLI reads)."""
        if _gram_kernel(self):
            raise ValueError("a model fitted with kernel='precomputed' or a callable kernel cannot be saved as a "
                             "Stolr model file (it keeps no kernel the CLI can evaluate on rows); pickle the "
                             "estimator instead (its dual_coef_ or eigenvectors_ are plain arrays)")
        check_is_fitted(self, "model_")
        with open(path, "wb") as f:
            f.write(self.model_)


class KernelPCA(_FeatureNamesOut, TransformerMixin, BaseEstimator, _Model):
    """Kernel PCA by SKPCA (stochastic proximal gradient), Nyström, KHA or the exact solver
    (``solver="exact"``: the dense kernel matrix or the matrix-free operator, whichever fits and
    is estimated faster; ``"exact-dense"`` and ``"exact-matrix-free"`` force one of them).

    ``fit`` runs the library's kernel PCA job, the one ``stolr kpca`` runs: the same data,
    parameters and ``random_state`` (the CLI's ``--seed``) give the same bits (docs/front-ends.md
    lists the defaults that differ by convention: ``center=True`` here, ``gamma`` for ``--sigma``).

    Eigenvalues are in nonincreasing order. ``transform`` projects new rows on the kernel
    principal axes, scaled as scikit-learn's ``KernelPCA.transform``.

    ``X`` may be a ``scipy.sparse`` matrix with every solver (exact, exact-matrix-free, Nyström,
    SKPCA with every sampler, KHA): it is never densified (kernel values and random features
    from the stored entries; the model keeps its rows sparse) and gives the dense result to
    about 1e-12. ``fit_inverse_transform=True`` needs dense rows (``ValueError``).

    ``memory_limit`` (bytes, or a size such as ``"2G"``; default 80 % of the memory available)
    bounds every allocation whose size follows from the data or a parameter: a fit that would
    exceed it raises ``MemoryError`` before doing the work.

    ``fit_inverse_transform`` (default False): also learn the pre-image map, scikit-learn's
    ``fit_inverse_transform``: kernel ridge regression with the same kernel from the training
    embedding ``X_transformed_fit_`` (n, n_components) back to the rows, ridge ``alpha``
    (default 1.0), coefficients ``dual_coef_`` (n, n_features); ``inverse_transform(Z)`` is
    ``k(Z, X_transformed_fit_) @ dual_coef_`` (Bakır, Weston & Schölkopf, "Learning to find
    pre-images", NIPS 2004). Solvers ``exact``, ``exact-dense``, ``exact-matrix-free``, ``kha``
    and ``skpca``; it costs an n × n solve (about 16·n² bytes, within ``memory_limit``).
    """

    def __init__(self, n_components=None, kernel="rbf", gamma=None, degree=3, coef0=1.0,
                 solver="exact", center=True, tau=None, n_iter=1000, n_features=50,
                 sampler="rff", n_landmarks=500, memory_limit=None, random_state=None, verbose=False,
                 fit_inverse_transform=False, alpha=1.0, whiten=False, landmarks=None):
        self.landmarks = landmarks
        self.whiten = whiten
        self.fit_inverse_transform = fit_inverse_transform
        self.alpha = alpha
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

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # Every solver takes scipy.sparse rows as they are (the pre-image map needs dense ones).
        tags.input_tags.sparse = self.solver in ("exact", "exact-dense", "exact-matrix-free", "nystrom", "skpca", "kha")
        # kernel="precomputed": X is the Gram matrix (scikit-learn's pairwise tag), taken dense.
        tags.input_tags.pairwise = _is_precomputed(self)
        if _gram_kernel(self):
            tags.input_tags.sparse = False
        return tags

    def fit(self, X, y=None, comm=None, broadcast=True):
        """``comm`` (an mpi4py communicator, e.g. ``MPI.COMM_WORLD``): ``X`` is this rank's block of
        rows, the ranks' blocks consecutive in rank order; the library's sharded fit runs
        (collective; ``stolr/_mpi.py``, docs/distributed.md). ``broadcast=True``: every rank gets
        the model; False: rank 0 only. Errors are raised on every rank (or the job aborted)."""
        if comm is not None:  # each rank's rows under mpirun (mpi4py): stolr/_mpi.py
            from ._mpi import fit_kernel_pca
            return fit_kernel_pca(self, X, comm, broadcast)
        if _dask.is_dask(X):  # a row-chunked dask.array.Array: Nyström or exact, chunk by chunk (_dask.py)
            return _dask.fit_kernel_pca(self, X)
        if _gram_kernel(self):
            return self._fit_gram(X)
        # Sparse rows (scipy.sparse) stay sparse for the exact and Nyström solvers.
        X = validate_data(self, X, accept_sparse="csr", dtype=_DTYPES, ensure_min_samples=2)
        n_components = self.n_components if self.n_components is not None else min(X.shape)
        # As KernelRidge: at most one landmark per training row (the default 500 on fewer rows).
        n_landmarks = min(_count("n_landmarks", self.n_landmarks), X.shape[0])
        given = _landmark_kwargs(self.landmarks)
        if given and self.n_components is None:  # at most one eigenpair per given landmark
            n_components = min(n_components, len(next(iter(given.values()))))
        model, values, vectors, warns, n_iter = _core.fit_kernel_pca(
            _rows(X), n_components, self.kernel, _gamma(self.gamma, X.shape[1]),
            int(self.degree), float(self.coef0), self.solver, bool(self.center), self.tau,
            _count("n_iter", self.n_iter), _count("n_features", self.n_features), self.sampler, n_landmarks,
            _seed(self.random_state), bool(self.verbose),
            None if self.memory_limit is None else str(self.memory_limit),
            inverse_alpha=float(self.alpha) if self.fit_inverse_transform else None,
            **given)
        # The fit's warnings: fewer eigenpairs than n_components (the kernel's numerical rank),
        # or KHA stopped before its residual test passed. Without n_components, the pairs that
        # exist are what was asked for.
        for message in warns:
            if self.n_components is not None or "requested" not in message:
                warnings.warn(message, _warning_category(message), stacklevel=2)
        self.model_ = model
        self.eigenvalues_ = values
        # Eigenvectors (n, r) of the (centred) training kernel matrix, as the CLI writes them.
        self.eigenvectors_ = vectors
        # SKPCA's and KHA's iterations; the direct solvers (exact, Nyström) count as one.
        self.n_iter_ = max(int(n_iter), 1)
        _set_preimage_attributes(self)
        return self

    def transform(self, X):
        if _dask.is_dask(X):  # a Dask array back, computed chunk by chunk
            return _dask.transform_kernel_pca(self, X)
        if _gram_kernel(self):
            return self._transform_gram(X)
        check_is_fitted(self, "model_")
        X = validate_data(self, X, accept_sparse="csr", dtype=_DTYPES, reset=False)
        Z = _core.transform(self.model_, _rows(X))
        if getattr(self, "whiten", False):
            Z /= _whiten_scale(self.eigenvalues_)
        return Z

    def _fit_gram(self, X):
        """The fit of ``kernel="precomputed"`` (``X`` the training Gram matrix, n × n) or of a
        callable kernel (its Gram matrix of the rows ``X``): the exact solver's eigenpairs of
        the (centred) Gram matrix in the library (``_core.fit_kernel_pca_precomputed``)."""
        _check_gram_solver(self, "exact")
        if self.fit_inverse_transform:
            what = "a precomputed kernel" if _is_precomputed(self) else "a callable kernel"
            raise ValueError(f"Cannot fit_inverse_transform with {what}: the pre-image map needs the "
                             "kernel on points of the embedding (use a named kernel)")
        X = validate_data(self, X, dtype=np.float64, ensure_min_samples=2)
        K = _gram_and_rows(self, X)
        n_components = K.shape[0] if self.n_components is None else _count("n_components", self.n_components)
        values, vectors, means, grand_mean, warns = _core.fit_kernel_pca_precomputed(
            K, n_components, bool(self.center), None if self.memory_limit is None else str(self.memory_limit))
        for message in warns:
            if self.n_components is not None or "requested" not in message:
                warnings.warn(message, _warning_category(message), stacklevel=3)
        _drop(self, "model_", "dual_coef_", "X_transformed_fit_", "K_fit_rows_", "K_fit_all_")
        self.eigenvalues_ = values
        self.eigenvectors_ = vectors
        if means is not None:
            # scikit-learn's KernelCenterer names: the training Gram matrix's column means and
            # their mean, which centre a cross kernel.
            self.K_fit_rows_ = means
            self.K_fit_all_ = float(grand_mean)
        self.n_iter_ = 1
        return self

    def _transform_gram(self, X):
        """``transform`` of ``kernel="precomputed"`` (``X`` the cross kernel, n_test × n_train)
        or of a callable kernel (its cross kernel of the rows ``X`` with ``X_fit_``), centred
        with the training means in the library (``_core.transform_precomputed``)."""
        check_is_fitted(self, ["eigenvalues_", "eigenvectors_"] + ([] if _is_precomputed(self) else ["X_fit_"]))
        X = validate_data(self, X, dtype=np.float64, reset=False)
        centred = hasattr(self, "K_fit_rows_")
        Z = _core.transform_precomputed(_cross_kernel(self, X), self.eigenvalues_, self.eigenvectors_,
                                        self.K_fit_rows_ if centred else None,
                                        self.K_fit_all_ if centred else None)
        if getattr(self, "whiten", False):
            Z /= _whiten_scale(self.eigenvalues_)
        return Z

    def inverse_transform(self, X):
        """The pre-images of points ``X`` (m, n_components) of the embedding, (m, n_features),
        by the kernel ridge map learned with ``fit_inverse_transform=True``."""
        if _gram_kernel(self):
            from sklearn.exceptions import NotFittedError
            raise NotFittedError("no inverse transform with kernel='precomputed' or a callable kernel: "
                                 "fit_inverse_transform needs a named kernel")
        check_is_fitted(self, "model_")
        if not hasattr(self, "dual_coef_"):
            from sklearn.exceptions import NotFittedError
            raise NotFittedError("The fit_inverse_transform parameter was not set to True when fitting, "
                                 "so the inverse transform is not available: refit with "
                                 "fit_inverse_transform=True")
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"expected a 2-D array of points (m, n_components), got shape {X.shape}")
        if getattr(self, "whiten", False):  # back to the embedding the map was fitted on
            X = X * _whiten_scale(self.eigenvalues_)
        return _core.kernel_pca_inverse_transform(self.model_, np.ascontiguousarray(X))


class PCA(_FeatureNamesOut, TransformerMixin, BaseEstimator, _Model):
    """PCA by the exact solver, SVRG with Barzilai–Borwein steps or VR-PCA; centred by default.

    Parameters
    ----------
    n_components : int, float or None, default=2
        Components kept. An integer ``1..min(n_samples, n_features)``; ``None``:
        ``min(n_samples, n_features)``; a float in (0, 1): the smallest number of components
        whose ``explained_variance_ratio_`` sums to at least that share (chosen from an exact
        fit of every component, as scikit-learn's ``PCA``; the solver then fits that many).
        The default 2 is the CLI's ``--rank``, not scikit-learn's ``None``.
    solver : {"exact", "svrg-bb", "vr-pca"}, default="exact"
        ``exact``: a dense symmetric eigensolver on the covariance. ``svrg-bb``: SVRG on the
        exact-penalty objective with Barzilai–Borwein steps (Jung, Lee and Yun, "A stochastic
        variance reduction method for PCA by an exact penalty approach", Bull. Korean Math.
        Soc. 2018). ``vr-pca``: Shamir's block VR-PCA (Shamir, "A Stochastic PCA and SVD
        Algorithm with an Exponential Convergence Rate", ICML 2015).
    center : bool, default=True
        Subtract every feature's mean before the fit (scikit-learn always does).
    whiten : bool, default=False
        ``transform`` divides each projection by ``sqrt(explained_variance_)`` (unit variance
        on the training rows, as scikit-learn's ``whiten=True``); ``inverse_transform``
        multiplies it back.
    max_iter : int or None, default=None
        Epochs of an iterative solver: ``None`` is 1000 for ``svrg-bb`` (which stops earlier
        when its gradient test passes) and 10 for ``vr-pca`` (which always runs them all).
        Ignored by ``exact``.
    tol : float, default=1e-3
        After an iterative fit, every component ``v`` must satisfy
        ``||C v - theta v|| / theta <= tol`` on the training covariance ``C``
        (``theta = v' C v``); otherwise a ``sklearn.exceptions.ConvergenceWarning`` names the
        components that are not eigenvectors.
    random_state : None, int, numpy.random.RandomState or numpy.random.Generator, default=None
        ``None`` is seed 0 (reproducible); an integer gives the same bits as ``stolr pca
        --seed``; a generator gives one seed drawn from it.
    verbose : bool, default=False
        Progress of an iterative solver every 0.2 s on ``sys.stderr`` (shown in Jupyter).

    Attributes
    ----------
    components_ : (n_components_, n_features) ndarray
    explained_variance_ : (n_components_,) ndarray, non-increasing
    explained_variance_ratio_ : (n_components_,) ndarray
        Each component's share of the total variance of the centred rows (sums to at most 1).
    singular_values_ : (n_components_,) ndarray
        ``sqrt(explained_variance_ * (n_samples_ - 1))``, the singular values of the centred rows.
    mean_ : (n_features,) ndarray
    n_components_, n_samples_, n_features_in_, feature_names_in_ (DataFrame input)
    n_iter_ : int
        Epochs the iterative solver ran; 1 after ``solver="exact"`` (one dense
        eigendecomposition).

    Ctrl-C interrupts a fit (``KeyboardInterrupt``) within about 0.2 s of the next iteration.
    """

    def __init__(self, n_components=2, solver="exact", center=True, whiten=False, max_iter=None, tol=PCA_RESIDUAL_TOL,
                 random_state=None, verbose=False):
        self.verbose = verbose
        self.n_components = n_components
        self.solver = solver
        self.center = center
        self.whiten = whiten
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    def fit(self, X, y=None, comm=None, broadcast=True):
        """``comm`` (an mpi4py communicator, e.g. ``MPI.COMM_WORLD``): ``X`` is this rank's block of
        rows, the ranks' blocks consecutive in rank order; the library's sharded fit runs
        (collective; ``stolr/_mpi.py``, docs/distributed.md). ``broadcast=True``: every rank gets
        the model; False: rank 0 only. Errors are raised on every rank (or the job aborted)."""
        if comm is not None:  # each rank's rows under mpirun (mpi4py): stolr/_mpi.py
            from ._mpi import fit_pca
            return fit_pca(self, X, comm, broadcast)
        if _dask.is_dask(X):  # a row-chunked dask.array.Array: the exact solver, chunk by chunk
            return _dask.fit_pca(self, X)
        # Finite values are checked by the library in its own pass (ValueError naming the row
        # and column), not a second time here: on 70 000 x 784 rows that pass of scikit-learn's
        # took 62-107 ms, about a tenth of the exact fit.
        X = validate_data(self, X, dtype=_DTYPES, ensure_min_samples=2, ensure_all_finite=False)
        X = np.ascontiguousarray(X)
        max_iter = None if self.max_iter is None else _count("max_iter", self.max_iter)
        seed = _seed(self.random_state)
        k = _pca_components(self.n_components, *X.shape)
        if isinstance(k, float):
            full = _core.fit_pca(X, min(X.shape), "exact", bool(self.center), seed, False)
            k = _rank_for_share(_core.pca_explained_variance_ratio(full), k)
        model, stop, epochs, residuals = _core.fit_pca_report(X, k, self.solver, bool(self.center), seed,
                                                              bool(self.verbose), max_iter)
        self.model_ = model
        self._set_attributes()
        # The exact solver's one dense eigendecomposition counts as one iteration (scikit-learn's
        # estimators with max_iter report n_iter_ >= 1).
        self.n_iter_ = 1 if residuals is None else int(epochs)
        if residuals is not None:
            _warn_pca_residuals(self.solver, residuals, float(self.tol), epochs, stop)
        return self

    def _set_attributes(self):
        """The fitted attributes read from ``model_``."""
        self.components_, self.explained_variance_, self.mean_ = _core.pca_attributes(self.model_)
        ratio = _core.pca_explained_variance_ratio(self.model_)
        if ratio is not None:
            self.explained_variance_ratio_ = ratio
        self.n_samples_ = int(json.loads(_core.model_parameters(self.model_))["n_samples"])
        self.n_components_ = self.components_.shape[0]
        self.singular_values_ = np.sqrt(np.maximum(self.explained_variance_, 0.0) * max(self.n_samples_ - 1, 1))

    def transform(self, X):
        if _dask.is_dask(X):  # a Dask array back, computed chunk by chunk
            return _dask.transform_pca(self, X)
        check_is_fitted(self, "model_")
        X = validate_data(self, X, dtype=_DTYPES, reset=False)
        Z = _core.transform(self.model_, np.ascontiguousarray(X))
        if getattr(self, "whiten", False):
            Z /= _whiten_scale(self.explained_variance_)
        return Z

    def inverse_transform(self, X):
        if _dask.is_dask(X):  # a Dask array back, computed chunk by chunk
            return _dask.inverse_transform_pca(self, X)
        check_is_fitted(self, "model_")
        Z = np.array(X, dtype=np.float64, copy=True)
        if getattr(self, "whiten", False):
            Z *= _whiten_scale(self.explained_variance_)
        return _core.inverse_transform(self.model_, np.ascontiguousarray(Z))


class StreamingPCA(_FeatureNamesOut, TransformerMixin, BaseEstimator, _Model):
    """Streaming PCA: one pass over the rows (``fit``) or over batches of rows
    (``partial_fit``), memory ``O(d·k)`` whatever the number of rows.

    Parameters
    ----------
    n_components : int, default=1
        Components ``k``, ``1 <= k < n_features``.
    solver : {"incremental", "capped-msg", "msg", "oja"}, default="incremental"
        ``incremental``: the incremental PCA of Arora, Cotter, Livescu and Srebro (the
        baseline of Arora, Cotter and Srebro, "Stochastic Optimization of PCA with Capped
        MSG", NIPS 2013, Section 5); ``capped-msg`` and ``msg``: matrix stochastic gradient
        with and without the rank cap (the same paper); ``oja``: Oja's rule. The default is
        ``incremental`` because, with ``oversample``, it is the one that matches
        scikit-learn's ``IncrementalPCA`` after one pass: on held-out digits (8x8 images, 30 %
        held out, 4 splits, k = 1..20) and on generated data with an offset, its captured
        variance was never more than 0.9 % below ``IncrementalPCA``'s (0.3 % for k >= 5;
        often above it: ``IncrementalPCA`` itself loses up to 15 % at k = 1..2), where one
        pass of capped MSG lost up to 15 % and MSG up to 10 %.
    oversample : int or None, default=None
        ``None``: 10 for ``incremental``, 0 for the other solvers (so that each of them is the
        CLI's ``stolr pca --solver ...`` with the same seed, bit for bit).
        Extra directions the solver tracks: ``min(n_components + oversample, n_features - 1)``
        directions, of which the Rayleigh–Ritz step keeps the top ``n_components`` (memory
        ``O(n_features * (n_components + oversample))``). One pass of the incremental algorithm
        on exactly ``n_components`` directions can lock onto a wrong axis (the capped-MSG paper, Section 5.2;
        24 % of held-out variance lost on digits with k = 1); 0 tracks exactly
        ``n_components``, the CLI's ``stolr pca --solver ...``.
    center : bool, default=True
        Subtract the feature means, as scikit-learn's ``IncrementalPCA``: ``fit`` computes
        them in a first pass over ``X``; ``partial_fit`` keeps a running mean and centres each
        batch with the mean of every row seen so far (``mean_``). ``False``: the components
        are the top eigenvectors of the second moment ``E[x x']``, as in the paper.
    eta_scale : float, default=0.5
        The scale ``c`` of the step size ``eta_t = c / (sqrt(t) * running mean of ||x||^2)``.
    cap : int or None, default=None
        Capped MSG's rank cap; ``None`` is ``n_components + 1``.
    batch_size : int or None, default=None
        Kept for compatibility with ``IncrementalPCA``; changes nothing (every solver takes
        the rows one at a time).
    whiten : bool, default=False
        ``transform`` divides each projection by ``sqrt(explained_variance_)``.
    random_state : None, int, numpy.random.RandomState or numpy.random.Generator, default=None
        The solver's starting point: ``None`` is seed 0; an integer gives the bits of
        ``stolr pca --seed``; a generator gives one seed drawn from it.
    tol : float, default=0.1
        After ``fit``, every component ``v`` must satisfy ``||C v - theta v|| / theta <= tol``
        on the covariance ``C`` of ``X`` (``theta = v' C v``), or a
        ``sklearn.exceptions.ConvergenceWarning`` names those that are not eigenvectors.
        Looser than ``PCA``'s 1e-3: one pass of a stochastic solver does not reach eigenvector
        accuracy. On digits and on generated data with an offset (k = 1..20) the default
        solver stayed below 0.04, while the one-pass fits that lost more than 2 % of the
        held-out variance to ``IncrementalPCA`` (capped MSG, MSG, Oja without oversampling)
        were above it in all but one case. ``partial_fit`` checks nothing (it keeps no rows).
    verbose : bool, default=False
        Progress every 0.2 s of ``fit`` on ``sys.stderr``.

    The solvers keep no rows, so after ``partial_fit`` ``components_`` (n_components,
    n_features) and ``explained_variance_`` (non-increasing) are the Rayleigh–Ritz pairs of
    the current subspace on the latest batch; ``fit`` computes them on all of ``X``.
    """

    def __init__(self, n_components=1, solver="incremental", oversample=None, center=True, eta_scale=0.5, cap=None,
                 batch_size=None, whiten=False, tol=0.1, random_state=None, verbose=False):
        self.n_components = n_components
        self.tol = tol
        self.solver = solver
        self.oversample = oversample
        self.center = center
        self.eta_scale = eta_scale
        self.cap = cap
        self.batch_size = batch_size
        self.whiten = whiten
        self.random_state = random_state
        self.verbose = verbose

    def _check_params(self):
        if self.batch_size is not None and not (_is_int(self.batch_size) and self.batch_size >= 1):
            raise ValueError(f"batch_size must be a positive integer or None, got {self.batch_size!r}")
        if not _is_int(self.n_components):
            raise TypeError(f"n_components must be an integer, got {type(self.n_components).__name__}")
        if self.cap is not None and not (_is_int(self.cap) and self.cap >= 1):
            raise ValueError(f"cap must be a positive integer or None, got {self.cap!r}")
        oversample = getattr(self, "oversample", 0)
        if oversample is not None and not (_is_int(oversample) and oversample >= 0):
            raise ValueError(f"oversample must be a non-negative integer or None, got {oversample!r}")

    def _tracked(self, n_features):
        """The directions the solver tracks: ``n_components + oversample``, below ``n_features``."""
        k = int(self.n_components)
        oversample = getattr(self, "oversample", 0)
        if oversample is None:
            oversample = 10 if self.solver == "incremental" else 0
        return max(k, min(k + int(oversample), n_features - 1))

    def _keep(self, model):
        """The model with the top ``n_components`` of the tracked directions."""
        k = int(self.n_components)
        return model if _core.pca_attributes(model)[0].shape[0] == k else _core.pca_truncate(model, k)

    def partial_fit(self, X, y=None):
        first = not hasattr(self, "state_")
        self._check_params()
        X = validate_data(self, X, dtype=_DTYPES, reset=first)
        if first:
            if not 1 <= int(self.n_components) < X.shape[1]:
                raise ValueError(f"n_components={self.n_components} must be at least 1 and below the "
                                 f"number of features (n_features = {X.shape[1]})")
            self.state_ = _core.StreamingState(self.solver, X.shape[1], self._tracked(X.shape[1]),
                                               float(self.eta_scale), self.cap, _seed(self.random_state))
            self.mean_ = np.zeros(X.shape[1])
        mean = None
        if getattr(self, "center", False):
            # The running mean of every row seen, this batch's included.
            seen = self.state_.samples_seen()
            mean = (seen * self.mean_ + X.sum(axis=0, dtype=np.float64)) / (seen + X.shape[0])
            X = X - mean
        X = np.ascontiguousarray(X)
        self.state_.partial_fit(X)
        # The top n_components of the tracked directions by the solver's eigenvalues over every
        # row seen (a batch's own Ritz values would pick them by the noise of a few rows).
        self.model_ = self.state_.model(X, None if mean is None else [float(m) for m in mean],
                                        int(self.n_components))
        self.components_, self.explained_variance_, self.mean_ = _core.pca_attributes(self.model_)
        self.n_samples_seen_ = self.state_.samples_seen()
        return self

    def fit(self, X, y=None):
        """One pass of the solver over the rows of ``X`` in order (after a pass for the mean
        with ``center``), then Rayleigh–Ritz on all of ``X``: the library's streaming job, the
        fit ``stolr pca --solver ...`` runs (the same seed gives the same components).
        ``partial_fit`` afterwards continues the stream. A row-chunked ``dask.array.Array`` is
        streamed chunk by chunk, each computed when the pass reaches it (the same bits)."""
        if _dask.is_dask(X):  # one chunk at a time, in order (_dask.py)
            return _dask.fit_streaming_pca(self, X)
        self._check_params()
        X = validate_data(self, X, dtype=_DTYPES, ensure_min_samples=2)
        for attr in ("state_", "model_"):
            if hasattr(self, attr):
                delattr(self, attr)
        if not 1 <= int(self.n_components) < X.shape[1]:
            raise ValueError(f"n_components={self.n_components} must be at least 1 and below the "
                             f"number of features (n_features = {X.shape[1]})")
        self.state_, model = _core.fit_streaming(
            np.ascontiguousarray(X), self.solver, self._tracked(X.shape[1]), float(self.eta_scale), self.cap,
            _seed(self.random_state), bool(getattr(self, "center", False)), bool(getattr(self, "verbose", False)))
        self.model_ = self._keep(model)
        residuals = _core.pca_ritz_residuals(self.model_, np.ascontiguousarray(X))
        _warn_pca_residuals(self.solver, residuals, float(getattr(self, "tol", 0.1)), None,
                            after="after one pass",
                            remedy="use solver='incremental' with oversample, or PCA on data that fit in memory")
        self.components_, self.explained_variance_, self.mean_ = _core.pca_attributes(self.model_)
        self.n_samples_seen_ = self.state_.samples_seen()
        return self

    def transform(self, X):
        if _dask.is_dask(X):  # a Dask array back, computed chunk by chunk
            return _dask.transform_streaming_pca(self, X)
        check_is_fitted(self, "model_")
        X = validate_data(self, X, dtype=_DTYPES, reset=False)
        Z = _core.transform(self.model_, np.ascontiguousarray(X))
        if getattr(self, "whiten", False):
            Z /= _whiten_scale(self.explained_variance_)
        return Z

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


class IncrementalKernelPCA(_FeatureNamesOut, TransformerMixin, BaseEstimator, _Model):
    """Kernel PCA of rows that arrive in batches (``partial_fit``) or are read from an array or a
    NumPy memmap a batch at a time (``fit``), in memory independent of the number of rows,
    following scikit-learn's ``IncrementalPCA`` conventions.

    Parameters
    ----------
    n_components : int or None, default=None
        Eigenpairs ``r``. ``None``: every pair the kernel matrix has (at most ``n_landmarks``
        for Nyström, ``2 * n_features - 1`` for random features).
    kernel : {"rbf", "laplacian", "poly"}, default="rbf"
        scikit-learn's kernels (random features need ``rbf`` or ``laplacian``).
    gamma : float or None, default=None
        scikit-learn's ``gamma`` (``None``: ``1 / n_features_in_``); ``degree`` and ``coef0``
        for ``poly``.
    solver : {"nystrom", "rff"}, default="nystrom"
        ``nystrom``: Nyström features on ``n_landmarks`` landmarks. **The landmarks are the
        first ``n_landmarks`` rows given** (``fit``: the first rows of ``X``; ``partial_fit``:
        the first rows across batches), held until that many rows have arrived; they are a
        uniform sample of the data only if the rows come in random order (shuffle them first;
        ``stolr kpca --solver streaming-nystrom`` draws them uniformly by reservoir sampling
        from a file it can read twice). Every row, the landmark rows included, is then
        accumulated into the ``m x m`` second moment of the Nyström features and their sum, and
        the model at any time is the exact Nyström kernel PCA (centred) of all rows seen with
        those landmarks: the in-memory ``KernelPCA(solver="nystrom")`` with those landmarks, to
        rounding. Memory about ``8 * (5 m^2 + 2 m d)`` bytes.
        ``rff``: random Fourier features (``n_features`` frequencies, ``2 * n_features``
        features, drawn with ``random_state`` at the first batch); the state keeps the
        ``2D x 2D`` scatter of the features and their sum, and the model is the exact PCA of the
        centred random features of every row seen: its eigenvalues are exact for the
        random-feature kernel matrix ``Z Z'`` (centred exactly), which approximates the kernel
        matrix with error ``O(1/sqrt(n_features))``. Memory about ``8 * 4 * (2D)^2`` bytes
        (unlike ``stolr kpca --solver streaming-rff``, which streams through capped MSG and
        reads the rows twice).
    n_landmarks : int, default=500
        Nyström landmarks ``m``; ``fit`` uses ``min(n_landmarks, n_samples)``.
    n_features : int, default=500
        Random Fourier frequencies ``D`` of ``solver="rff"``.
    batch_size : int or None, default=None
        Rows per batch of ``fit`` (``None``: 4096). The result does not depend on it, bit for
        bit (nor on how ``partial_fit`` batches are cut): the rows are accumulated in blocks of
        256 counted from the first row.
    center : bool, default=True
        Centre in feature space, exactly, from running sums (scikit-learn's ``KernelPCA``
        always centres).
    memory_limit : int, str or None, default=None
        Bytes, or a size such as ``"2G"`` (default 80 % of the memory available): the state is
        checked against it at the first batch (``MemoryError``).
    random_state : None, int, numpy.random.RandomState or numpy.random.Generator, default=None
        The random frequencies (``rff``); ``None`` is seed 0.

    Attributes
    ----------
    eigenvalues_ : ndarray of shape (r,)
        Eigenvalues of the (centred) approximate kernel matrix of the rows seen, nonincreasing,
        on scikit-learn's ``KernelPCA.eigenvalues_`` scale (sums over rows).
    n_samples_seen_ : int
        Rows seen.
    n_features_in_ : int
    model_ : bytes
        The model file (kind ``kernel-pca`` for Nyström, ``rff-kernel-pca`` for random
        features) that ``save`` writes and ``stolr transform`` applies.

    There is no ``eigenvectors_``: the eigenvectors over the training rows are ``n x r``, which
    a fit in memory independent of ``n`` does not keep; ``transform(X_train)`` gives the
    training projections ``U Lambda^(1/2)``. After ``partial_fit`` with fewer than
    ``n_landmarks`` rows (Nyström) there is no model yet: ``transform`` raises
    ``NotFittedError`` saying so. A pickled estimator keeps its sums (the ``m x m`` or
    ``2D x 2D`` matrix), so ``partial_fit`` after unpickling continues the stream, bit for bit.
    """

    def __init__(self, n_components=None, kernel="rbf", gamma=None, degree=3, coef0=1.0, solver="nystrom",
                 n_landmarks=500, n_features=500, batch_size=None, center=True, memory_limit=None,
                 random_state=None):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.solver = solver
        self.n_landmarks = n_landmarks
        self.n_features = n_features
        self.batch_size = batch_size
        self.center = center
        self.memory_limit = memory_limit
        self.random_state = random_state

    def _new_state(self, n_features_in, n_landmarks):
        if self.solver not in ("nystrom", "rff"):
            raise ValueError(f"solver must be 'nystrom' or 'rff', got {self.solver!r}")
        if not isinstance(self.kernel, str) or self.kernel == "precomputed":
            raise ValueError(f"kernel must be 'rbf', 'laplacian' or 'poly', got {self.kernel!r}")
        n_features = _count("n_features", self.n_features)
        if self.n_components is None:
            rank = n_landmarks if self.solver == "nystrom" else 2 * n_features - 1
        else:
            rank = _count("n_components", self.n_components)
        return _core.IncrementalKpcaState(
            self.solver, rank, self.kernel, _gamma(self.gamma, n_features_in), int(self.degree),
            float(self.coef0), bool(self.center), n_landmarks, n_features, _seed(self.random_state),
            None if self.memory_limit is None else str(self.memory_limit))

    def _take(self, X):
        self.state_.partial_fit(_rows(X))
        self.n_samples_seen_ = self.state_.samples_seen()

    def _set_model(self, partial=False):
        """The model of every row seen, or none yet (Nyström before its landmarks are in; after
        ``partial_fit``, rows so far that are one point in feature space, e.g. a single row),
        kept in ``_fitted`` as ``(model, eigenvalues)`` or ``None``."""
        self._fitted = None
        self._no_model = (f"no model yet: the first n_landmarks = {self._landmarks} rows are the landmarks and "
                          f"{self.n_samples_seen_} rows have been seen; partial_fit more rows")
        if self.solver == "nystrom" and self.n_samples_seen_ < self._landmarks:
            return
        try:
            model, values, warns = self.state_.model()
        except ValueError as e:
            if not (partial and "numerically zero" in str(e)):
                raise
            # More rows may still come: the state is kept, transform says why there is no model.
            self._no_model = f"no model yet: {e}"
            return
        for message in warns:
            if self.n_components is not None or "requested" not in message:
                warnings.warn(message, _warning_category(message), stacklevel=4)
        self._fitted = (model, values)

    def _current(self, name):
        """The model of the rows seen so far: computed when first asked after ``partial_fit``
        (an eigendecomposition of the ``m x m`` or ``2D x 2D`` sums, so that a loop of
        ``partial_fit`` calls costs only the accumulation), then kept until the next batch."""
        if "_fitted" not in self.__dict__:
            if "state_" not in self.__dict__:
                raise AttributeError(f"{type(self).__name__} is not fitted: no {name}")
            self._set_model(partial=True)
        if self._fitted is None:
            raise AttributeError(self._no_model)
        return self._fitted

    @property
    def model_(self):
        return self._current("model_")[0]

    @property
    def eigenvalues_(self):
        return self._current("eigenvalues_")[1]

    def partial_fit(self, X, y=None):
        """Takes the rows of the batch ``X`` (b, n_features), in order, and updates the model.
        A rejected batch (NaN or infinite entries, another width, no rows) raises ``ValueError``
        and changes nothing."""
        first = not hasattr(self, "state_")
        # Finite values are checked by the library batch by batch (no full-size temporary).
        X = validate_data(self, X, dtype=_DTYPES, reset=first, ensure_all_finite=False)
        if first:
            self._landmarks = _count("n_landmarks", self.n_landmarks)
            self.state_ = self._new_state(X.shape[1], self._landmarks)
            self.n_samples_seen_ = 0
        self._take(X)
        # The model is computed when first asked for (model_, eigenvalues_, transform).
        _drop(self, "_fitted")
        return self

    def fit(self, X, y=None):
        """A new fit on the rows of ``X``, read ``batch_size`` rows at a time: an array or a
        NumPy memmap (``np.load(path, mmap_mode="r")``), of which only one batch is converted
        or copied at a time. The same as ``partial_fit`` on any split of ``X`` into batches,
        with ``n_landmarks`` capped at the number of rows."""
        _drop(self, "state_", "_fitted", "n_samples_seen_", "_landmarks", "_no_model")
        if self.batch_size is not None and not (_is_int(self.batch_size) and self.batch_size >= 1):
            raise ValueError(f"batch_size must be a positive integer or None, got {self.batch_size!r}")
        batch = 4096 if self.batch_size is None else int(self.batch_size)
        # No copy of a float64 or float32 array or memmap; finite values checked batch by batch.
        X = validate_data(self, X, dtype=_DTYPES, ensure_min_samples=2, ensure_all_finite=False, copy=False)
        self._landmarks = min(_count("n_landmarks", self.n_landmarks), X.shape[0])
        self.state_ = self._new_state(X.shape[1], self._landmarks)
        self.n_samples_seen_ = 0
        for start in range(0, X.shape[0], batch):
            self._take(np.asarray(X[start:start + batch]))
        self._set_model()
        return self

    def transform(self, X):
        """Projections ``(n, r)`` of the rows of ``X`` on the kernel principal axes, scaled as
        scikit-learn's ``KernelPCA.transform`` (on the training rows: ``U Lambda^(1/2)``)."""
        if hasattr(self, "state_") and not hasattr(self, "model_"):
            from sklearn.exceptions import NotFittedError
            raise NotFittedError(self._no_model)
        check_is_fitted(self, "model_")
        X = validate_data(self, X, dtype=_DTYPES, reset=False)
        if _core.model_kind(self.model_) == "rff-kernel-pca":
            return _core.rff_kernel_pca_transform(self.model_, _rows(X))
        return _core.transform(self.model_, _rows(X))

    def __getstate__(self):
        # The sums travel as the bytes of a Stolr file, so that partial_fit continues after
        # unpickling (bit for bit); the model as its bytes.
        state = super().__getstate__() if hasattr(super(), "__getstate__") else self.__dict__.copy()
        state = dict(state)
        if state.get("state_") is not None:
            state["state_"] = state["state_"].to_bytes()
        return state

    def __setstate__(self, state):
        state = dict(state)
        saved = state.get("state_")
        if isinstance(saved, (bytes, bytearray)):
            del state["state_"]
        if hasattr(super(), "__setstate__"):
            super().__setstate__(state)
        else:
            self.__dict__.update(state)
        if isinstance(saved, (bytes, bytearray)):
            fresh = self._new_state(self.n_features_in_, self._landmarks)
            fresh.restore(bytes(saved))
            self.state_ = fresh


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
    ``(m,)`` for a 1-D ``y`` and ``(m, t)`` for a 2-D one, as scikit-learn does. ``X`` may be a
    ``scipy.sparse`` matrix with every solver (never densified: kernel values from the stored
    entries, the centres kept sparse; the dense result to about 1e-12 times the problem's
    conditioning); ``nu="auto"`` needs dense rows (``ValueError``).
    ``sample_weight`` (length n, finite, ≥ 0, not all zero) weights the squared errors:
    ``Σ w_i (y_i − f(x_i))² + alpha ‖f‖²`` (with ``solver="krr"`` and ``fit_intercept=False`` the
    same as scikit-learn's ``KernelRidge(alpha=alpha).fit(X, y, sample_weight=w)``); the intercept
    is fitted by weighted centring. ``dual_coef_``: the coefficients of the centres, ``(n,)`` or
    ``(n, t)`` for ``krr`` (scikit-learn's ``dual_coef_``), the landmark coefficients ``(M,)`` or
    ``(M, t)`` for the other solvers (SLKL with one output: its active landmarks; with several,
    every landmark in increasing row order).
    """

    def __init__(self, solver="krr", alpha=1.0, kernel="rbf", gamma=None, n_landmarks=200,
                 nu=0.01, fit_intercept=True, random_state=None, verbose=False, max_iter=None, tol=None,
                 nystrom_solve="auto", landmarks=None):
        self.landmarks = landmarks
        self.max_iter = max_iter
        self.tol = tol
        self.nystrom_solve = nystrom_solve
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
        # Every solver takes scipy.sparse rows as they are (nu="auto" needs dense ones).
        tags.input_tags.sparse = self.solver in ("krr", "nystrom", "slkl", "uniform", "krr-subset")
        tags.target_tags.multi_output = True
        # kernel="precomputed": X is the Gram matrix (scikit-learn's pairwise tag), taken dense.
        tags.input_tags.pairwise = _is_precomputed(self)
        if _gram_kernel(self):
            tags.input_tags.sparse = False
        return tags

    def fit(self, X, y, sample_weight=None, comm=None, broadcast=True):
        """``comm`` (an mpi4py communicator, e.g. ``MPI.COMM_WORLD``): ``X`` is this rank's block of
        rows (``y``: their targets), the ranks' blocks consecutive in rank order; the library's sharded fit runs
        (collective; ``stolr/_mpi.py``, docs/distributed.md). ``broadcast=True``: every rank gets
        the model; False: rank 0 only. Errors are raised on every rank (or the job aborted)."""
        if comm is not None:  # each rank's rows under mpirun (mpi4py): stolr/_mpi.py
            from ._mpi import fit_kernel_ridge
            return fit_kernel_ridge(self, X, y, sample_weight, comm, broadcast)
        if _dask.is_dask(X):  # a row-chunked dask.array.Array: Nyström, chunk by chunk (_dask.py)
            return _dask.fit_kernel_ridge(self, X, y, sample_weight)
        if _gram_kernel(self):
            return self._fit_gram(X, y, sample_weight)
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=_DTYPES, y_numeric=True, multi_output=True)
        n_landmarks = min(_count("n_landmarks", self.n_landmarks), X.shape[0])
        y = np.asarray(y, dtype=np.float64)
        self._y_ndim = y.ndim
        args = (self.solver, self.kernel, float(self.alpha), _gamma(self.gamma, X.shape[1]),
                n_landmarks, None if _is_auto(self.nu) else float(self.nu), bool(self.fit_intercept),
                _seed(self.random_state), bool(self.verbose))
        solves = dict(max_iter=None if self.max_iter is None else _count("max_iter", self.max_iter),
                      tol=None if self.tol is None else float(self.tol), nystrom_solve=str(self.nystrom_solve))
        solves.update(_landmark_kwargs(self.landmarks))
        if y.ndim == 1 and sample_weight is None:
            model, n_iter, warns = _core.fit_kernel_ridge(_rows(X), np.ascontiguousarray(y), *args, **solves)
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
            model, n_iter, warns = _core.fit_kernel_ridge_targets(_rows(X), np.ascontiguousarray(y2),
                                                                  sample_weight, *args, **solves)
        # An iterative solve that stopped before its own convergence test passed (Nyström's
        # conjugate gradients above tol, SLKL at its epoch cap).
        for message in warns:
            warnings.warn(message, _warning_category(message), stacklevel=2)
        self.model_ = model
        # Conjugate-gradient iterations (Nyström, summed over the outputs), SLKL's epochs, 1 for
        # a direct solve.
        self.n_iter_ = int(n_iter)
        coef, _ = _core.krr_coefficients(self.model_)
        self.dual_coef_ = coef[:, 0] if y.ndim == 1 else coef
        return self

    def predict(self, X):
        if _dask.is_dask(X):  # a Dask array back, computed chunk by chunk
            return _dask.predict_kernel_ridge(self, X)
        if _gram_kernel(self):
            return self._predict_gram(X)
        check_is_fitted(self, "model_")
        X = validate_data(self, X, accept_sparse="csr", dtype=_DTYPES, reset=False)
        ndim = getattr(self, "_y_ndim", None)
        if ndim is None:  # a loaded model: 2-D predictions for several outputs
            ndim = 2 if _core.krr_coefficients(self.model_)[1] > 1 else 1
        if ndim == 1:
            return _core.predict(self.model_, _rows(X))
        return _core.predict_outputs(self.model_, _rows(X))

    def _fit_gram(self, X, y, sample_weight):
        """The fit of ``kernel="precomputed"`` (``X`` the training Gram matrix, n × n) or of a
        callable kernel (its Gram matrix of the rows ``X``): the ``krr`` solver's solve on the
        Gram matrix in the library (``_core.fit_kernel_ridge_precomputed``), with the
        intercept, several outputs and sample weights as for a named kernel."""
        _check_gram_solver(self, "krr")
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True, multi_output=True)
        K = _gram_and_rows(self, X)
        y = np.asarray(y, dtype=np.float64)
        if sample_weight is not None:
            sample_weight = np.ascontiguousarray(_check_sample_weight(sample_weight, X, ensure_non_negative=True))
        coef, intercepts, least_squares = _core.fit_kernel_ridge_precomputed(
            K, np.ascontiguousarray(y.reshape(-1, 1) if y.ndim == 1 else y), sample_weight, float(self.alpha),
            bool(self.fit_intercept))
        if least_squares:  # scikit-learn's fallback, and its warning category (UserWarning)
            warnings.warn("K + alpha I is not positive definite (the kernel matrix is not positive semi-definite): "
                          "the dual problem was solved by least squares instead of Cholesky", UserWarning, stacklevel=3)
        _drop(self, "model_")
        self._y_ndim = y.ndim
        self.dual_coef_ = coef[:, 0] if y.ndim == 1 else coef
        # The unpenalized intercept b (0 without fit_intercept): f(x) = k(x, X_train) @ dual_coef_ + b.
        self.intercept_ = float(intercepts[0]) if y.ndim == 1 else intercepts
        self.n_iter_ = 1
        return self

    def _predict_gram(self, X):
        """``predict`` of ``kernel="precomputed"`` (``X`` the cross kernel, n_test × n_train) or of
        a callable kernel (its cross kernel of the rows ``X`` with ``X_fit_``):
        ``K @ dual_coef_ + intercept_`` in the library (``_core.predict_precomputed``)."""
        check_is_fitted(self, ["dual_coef_", "intercept_"] + ([] if _is_precomputed(self) else ["X_fit_"]))
        X = validate_data(self, X, dtype=np.float64, reset=False)
        coef = self.dual_coef_.reshape(-1, 1) if self.dual_coef_.ndim == 1 else self.dual_coef_
        f = _core.predict_precomputed(_cross_kernel(self, X), np.ascontiguousarray(coef),
                                      np.atleast_1d(np.asarray(self.intercept_, dtype=np.float64)))
        return f[:, 0] if self.dual_coef_.ndim == 1 else f


# Every parameter with its default and a source to look up, appended to the class docstrings
# (kept apart from the classes' own text so that the parameter lists grow without reflowing it).
KernelPCA.__doc__ += """
    Parameters
    ----------
    n_components : int or None, default=None
        Eigenpairs kept; ``None`` keeps every numerically nonzero one (exact, Nyström, KHA)
        or those above ``tau`` (SKPCA). Fewer than asked for gives a ``RuntimeWarning``.
    kernel : {"rbf", "laplacian", "poly", "linear", "cosine", ...}, default="rbf"
        scikit-learn's kernel names: ``exp(-gamma ||x - y||^2)``, ``exp(-gamma ||x - y||_1)``,
        ``(gamma <x, y> + coef0)^degree``, ``<x, y>``, ``<x, y> / (||x|| ||y||)``.
    gamma : float or None, default=None
        The kernel's scale; ``None`` is ``1 / n_features`` (scikit-learn's default).
    degree : int, default=3
        The polynomial kernel's degree.
    coef0 : float, default=1.0
        The polynomial kernel's offset.
    solver : {"exact", "exact-dense", "exact-matrix-free", "nystrom", "skpca", "kha"}, default="exact"
        ``exact``: the eigenpairs of the dense kernel matrix when it fits ``memory_limit``
        and is estimated faster (from 6000 rows, by the number of features and components:
        dense for many features, matrix-free for few), else the matrix-free solver (kernel
        products streamed in tiles, never stored), as ``stolr kpca`` chooses (its report.json
        says which ran and why). ``exact-dense``: always the dense kernel matrix (a
        ``MemoryError`` when it does not fit).
        ``nystrom``: the Nyström approximation on ``n_landmarks`` rows (Williams and Seeger,
        "Using the Nyström Method to Speed Up Kernel Machines", NIPS 2001). ``skpca``:
        stochastic proximal gradient descent with singular value shrinkage (Zhang, Yang, Yi,
        Jin and Zhou, "Stochastic Optimization for Kernel PCA", AAAI 2016, Algorithm 1).
        ``kha``: the kernel Hebbian algorithm (Kim, Franz and Schölkopf, "Iterative Kernel
        Principal Component Analysis for Image Modeling", IEEE TPAMI 2005), followed by a
        Rayleigh–Ritz step; a ``sklearn.exceptions.ConvergenceWarning`` when its residual
        ``||K u - lambda u|| / lambda_1`` stays above 1e-2.
    center : bool, default=True
        Centre the kernel in feature space (scikit-learn always does; ``stolr kpca
        --center``).
    tau : float or None, default=None
        SKPCA's shrinkage threshold (the nuclear-norm weight of the AAAI 2016 paper): ``None``
        places it between the estimated ``n_components``-th and next eigenvalue of the
        kernel matrix of a 2000-row subsample (10 eigenpairs without ``n_components``).
    n_iter : int, default=1000
        SKPCA's and KHA's iterations ``T``.
    n_features : int, default=50
        Features (or sampled columns) of each SKPCA draw of an unbiased kernel estimate.
    sampler : {"rff", "columns", "columns-sym", "maclaurin"}, default="rff"
        SKPCA's unbiased kernel estimator: random Fourier features (Rahimi and Recht, "Random
        Features for Large-Scale Kernel Machines", NIPS 2007; rbf and laplacian), uniform or
        symmetric column sampling, random Maclaurin features (Kar and Karnick, "Random Feature
        Maps for Dot Product Kernels", AISTATS 2012; poly).
    n_landmarks : int, default=500
        Nyström landmarks ``m`` (at most one per training row), drawn uniformly without
        replacement from ``random_state``; ignored when ``landmarks`` is given.
    landmarks : array-like or None, default=None
        Nyström's landmarks given instead of drawn (``solver="nystrom"`` only; scikit-learn
        issue #4982): a 1-D integer array ``(m,)`` of distinct 0-based training-row indices, or
        a 2-D array ``(m, n_features)`` of landmark rows, training rows or not, in the units of
        ``X`` (a ``scipy.sparse`` matrix of rows is densified). ``m`` is then their number
        (``n_landmarks`` is ignored) and no random draw is made, so the fit does not depend on
        ``random_state``; with ``n_components=None`` at most ``m`` eigenpairs are kept.
        Rows equal to the training rows ``X[idx]`` give the fit of the
        indices ``idx`` (to rounding). ``ValueError`` for an index out of range or repeated, rows
        of another width or with NaN/inf, an empty array, or another solver. The model keeps the
        landmark rows either way (``stolr kpca --landmarks-file``).
    memory_limit : int, str or None, default=None
        See above.
    random_state : None, int, numpy.random.RandomState or numpy.random.Generator, default=None
        ``None`` is seed 0; an integer gives the bits of ``stolr kpca --seed``; a generator
        gives one seed drawn from it.
    verbose : bool, default=False
        Progress of an iterative solver every 0.2 s on ``sys.stderr`` (shown in Jupyter).
    whiten : bool, default=False
        Divide ``transform``'s output by ``sqrt(eigenvalues_)`` per component (the model file is
        unchanged: applied around the model's projection). The training rows' projections
        then have unit norm per component (they are ``eigenvectors_``, up to sign), so their
        variance is ``1 / n_samples`` and equal across components; ``inverse_transform``
        multiplies by ``sqrt(eigenvalues_)`` first, so ``inverse_transform(transform(X))``
        does not depend on ``whiten``. A model loaded with ``stolr.load`` is not whitened.

    Attributes
    ----------
    eigenvalues_ : (r,) ndarray, nonincreasing
    eigenvectors_ : (n_samples, r) ndarray
        Eigenvectors of the (centred) training kernel matrix.
    n_iter_ : int
        SKPCA's or KHA's iterations; 1 for the direct solvers (exact, Nyström). A SKPCA run
        stopped by its rank cap (2000) gives a ``sklearn.exceptions.ConvergenceWarning``.
    n_features_in_, feature_names_in_ (DataFrame input)

    ``get_feature_names_out()`` names the outputs ``kernelpca0, kernelpca1, ...``, so
    ``set_output(transform="pandas")`` returns DataFrames.
"""

KernelRidge.__doc__ += """
    Parameters
    ----------
    solver : {"krr", "nystrom", "slkl", "krr-subset", "uniform"}, default="krr"
        ``krr``: exact kernel ridge regression on all n rows (one dense Cholesky
        factorization, memory about 16 n^2 bytes). ``nystrom``: ridge regression over the span
        of ``n_landmarks`` landmark kernel functions, fitted on all n rows (Williams and
        Seeger, NIPS 2001; a direct solve or preconditioned conjugate gradients). ``slkl``: a sparse conical combination of rank-1 Nyström kernels
        fitted by coordinate descent (Machart, Peel, Anthoine, Ralaivola and Glotin,
        "Stochastic Low-Rank Kernel Learning for Regression", ICML 2011). ``krr-subset``:
        exact KRR on the ``n_landmarks`` landmarks only. ``uniform``: the same paper's
        baseline, KRR with one common weight on the rank-1 kernels.
    alpha : float, default=1.0
        The ridge penalty ``lambda`` on the coefficients (scikit-learn's ``alpha``).
    kernel : {"rbf", "laplacian"}, default="rbf"
        ``exp(-gamma ||x - y||^2)`` or ``exp(-gamma ||x - y||_1)``.
    gamma : float or None, default=None
        The kernel's scale; ``None`` is ``1 / n_features`` (scikit-learn's default).
    n_landmarks : int, default=200
        Landmarks (``nystrom``, ``slkl``, ``krr-subset``, ``uniform``), at most one per row,
        drawn uniformly without replacement from ``random_state``; ignored when ``landmarks``
        is given.
    landmarks : array-like or None, default=None
        Landmarks given instead of drawn (scikit-learn issue #4982): a 1-D integer array
        ``(m,)`` of distinct 0-based training-row indices (``nystrom``, ``krr-subset``,
        ``uniform``), or a 2-D array ``(m, n_features)`` of landmark rows, training rows or not,
        in the units of ``X`` (``nystrom`` only: the predictor is
        ``f(x) = sum_j alpha_j k(x, l_j) + b`` over these rows). ``m`` is then their number
        (``n_landmarks`` is ignored) and no random draw is made for them. ``ValueError`` for an
        index out of range or repeated, rows of another width or with NaN/inf, an empty array,
        rows with ``krr-subset``/``uniform``, any landmarks with ``krr``/``slkl``
        (``stolr krr --landmarks-file``).
    nu : float or "auto", default=0.01
        The sparsity penalty of ``slkl`` and ``uniform``; ``"auto"`` chooses it by 5-fold
        cross-validation on the training rows.
    fit_intercept : bool, default=True
        Fit an unpenalized intercept (see above).
    random_state : None, int, numpy.random.RandomState or numpy.random.Generator, default=None
        ``None`` is seed 0; an integer gives the bits of ``stolr krr --seed``; a generator
        gives one seed drawn from it.
    verbose : bool, default=False
        Progress of SLKL every 0.2 s on ``sys.stderr`` (shown in Jupyter).
    max_iter : int or None, default=None
        The iteration cap of the iterative solves: Nyström's conjugate gradients (``None``:
        200) and SLKL's epochs (``None``: 1000). Ignored by the direct solvers.
    tol : float or None, default=None
        Nyström's conjugate gradients stop at this relative preconditioned residual (``None``:
        1e-8, the preconditioner of Rudi, Carratino and Rosasco, "FALKON: An Optimal Large
        Scale Kernel Method", NIPS 2017); SLKL stops after an epoch whose KKT violations are
        all at most ``tol * nu`` (``None``: 1e-3).
    nystrom_solve : {"auto", "direct", "cg"}, default="auto"
        How ``nystrom`` solves its M x M system: Cholesky factorizations, conjugate gradients,
        or ``auto`` (direct unless it costs more than about 30 CG iterations). A solve that
        stops unconverged (CG above ``tol`` at ``max_iter``; SLKL at ``max_iter`` epochs)
        gives a ``sklearn.exceptions.ConvergenceWarning``.

    Attributes
    ----------
    n_iter_ : int
        Conjugate-gradient iterations of ``nystrom`` (summed over the outputs), SLKL's epochs
        (the first output's), 1 for a direct solve.
    n_features_in_, feature_names_in_ (DataFrame input)
"""

# Precomputed and callable kernels (kept apart from the parameter lists above, which other
# entries extend).
KernelPCA.__doc__ += """
    Precomputed and callable kernels
    --------------------------------
    ``kernel="precomputed"``: ``fit(K)`` takes the training Gram matrix ``K`` (n, n) (square,
    finite, symmetric to 1e-10 times its largest entry, else ``ValueError``), ``transform(K_test)``
    the cross kernel (n_test, n_train), ``K_test[i, j] = k(x_test_i, x_train_j)``; as scikit-learn's
    ``KernelPCA(kernel="precomputed")``: the eigenpairs of the centred Gram matrix ``HKH``
    (``center=True``; ``H = I - 11'/n``), a cross kernel centred with the training column means
    (``K_fit_rows_``, their mean ``K_fit_all_``), the same ``eigenvalues_`` and eigenvectors up to
    sign. ``kernel`` a callable: ``kernel(x, y)`` of two 1-D rows returns a number
    (scikit-learn's convention for callables); its Gram matrix of ``X`` (``n(n + 1)/2`` calls; the
    rows are kept as ``X_fit_``) and the cross kernel of new rows are evaluated in Python, then the
    precomputed path runs. Bind the callable's own parameters with ``functools.partial`` or a
    closure: the estimator has no ``kernel_params`` (``gamma``, ``degree``, ``coef0`` are not
    passed to it). Only ``solver="exact"`` takes a Gram matrix (the eigensolver of the exact
    solver, in the library; memory ``8 n^2`` bytes for its copy); another solver raises
    ``ValueError``, as does ``fit_inverse_transform=True``. Such a fit has no model file:
    ``save`` raises ``ValueError`` (pickle the estimator instead). The pairwise tag
    (``__sklearn_tags__().input_tags.pairwise``) is set for ``"precomputed"``.
"""

KernelRidge.__doc__ += """
    Precomputed and callable kernels
    --------------------------------
    ``kernel="precomputed"``: ``fit(K, y, sample_weight=None)`` takes the training Gram matrix
    ``K`` (n, n) (square, finite, symmetric to 1e-10 times its largest entry, else ``ValueError``),
    ``predict(K_test)`` the cross kernel (n_test, n_train), ``K_test[i, j] = k(x_test_i, x_train_j)``.
    The fit is the ``krr`` solver's solve on ``K`` in the library (one Cholesky factorization,
    several outputs, sample weights): with ``fit_intercept=False`` scikit-learn's
    ``KernelRidge(kernel="precomputed")`` (which has no intercept); with ``fit_intercept=True``
    (the default) the same unpenalized intercept as a named kernel's, the bordered system, which
    equals centring ``K`` in feature space and the cross kernel with the training column means:
    a ``K`` equal to the rbf kernel matrix gives the model of ``kernel="rbf"``. ``dual_coef_``
    (n,) or (n, t) and ``intercept_`` (0 without the intercept) give
    ``predict(K_test) = K_test @ dual_coef_ + intercept_``. ``kernel`` a callable:
    ``kernel(x, y)`` of two 1-D rows returns a number (scikit-learn's convention); its Gram matrix
    of ``X`` (``n(n + 1)/2`` calls; the rows are kept as ``X_fit_``) and the cross kernel of new
    rows are evaluated in Python, then the precomputed path runs. Bind the callable's own
    parameters with ``functools.partial`` or a closure: the estimator has no ``kernel_params``.
    Only ``solver="krr"`` takes a Gram matrix; another solver raises ``ValueError``. When
    ``K + alpha I`` is not positive definite (a ``K`` that is not positive semi-definite), the
    system is solved by least squares with a ``UserWarning``, as scikit-learn does. Such a fit has no model file:
    ``save`` raises ``ValueError`` (pickle the estimator instead). The pairwise tag
    (``__sklearn_tags__().input_tags.pairwise``) is set for ``"precomputed"``.
"""


def _kernel_hyperparameters(kernel):
    """scikit-learn's ``kernel``, ``gamma``, ``degree``, ``coef0`` of a model file's kernel
    (its inverse of ``KernelFamily::sklearn_kernel``: the Gaussian's sigma is
    ``1/sqrt(2 gamma)``, the Laplacian's ``1/gamma``, the polynomial's scale ``1/gamma``)."""
    kind = kernel.get("type")
    if kind == "gaussian":
        return {"kernel": "rbf", "gamma": 1.0 / (2.0 * kernel["sigma"] ** 2)}
    if kind == "laplacian":
        return {"kernel": "laplacian", "gamma": 1.0 / kernel["sigma"]}
    if kind == "polynomial":
        return {"kernel": "poly", "gamma": 1.0 / kernel["scale"], "degree": int(kernel["degree"]),
                "coef0": float(kernel["offset"])}
    return {"kernel": kind}


def _restore(est, kind, data):
    """Sets on ``est`` the hyperparameters and fitted attributes a model file of ``kind`` holds.
    What the file does not record keeps the estimator's default: a KernelRidge's ``alpha``,
    ``n_landmarks`` and ``nu`` and every fit's ``random_state`` (the fitted model does not need
    them; refitting does)."""
    params = json.loads(_core.model_parameters(data))
    settable = est.get_params()
    hyper = {"solver": params.get("solver")}
    if "kernel" in params:
        hyper.update(_kernel_hyperparameters(params["kernel"]))
    if kind == "pca":
        est.model_ = data
        est._set_attributes()
        est.n_features_in_ = est.components_.shape[1]
        hyper.update(n_components=int(params["rank"]), center=bool(np.any(est.mean_ != 0)))
    elif kind == "kernel-pca":
        est.model_ = data
        est.eigenvalues_ = _core.model_vector(data, "eigenvalues")
        est.n_features_in_ = int(params["n_features"])
        hyper.update(n_components=int(params["rank"]), center=params.get("centering", "none") != "none")
        _set_preimage_attributes(est, loaded=True)
    elif kind == "rff-kernel-pca":
        # A random-feature kernel PCA (stolr kpca --solver streaming-rff, or this package's
        # IncrementalKernelPCA): the model only; partial_fit starts a new stream.
        est._fitted = (data, _core.model_vector(data, "eigenvalues"))
        est.n_features_in_ = int(params["n_features"])
        hyper.update(solver="rff", n_components=int(params["rank"]),
                     center=bool(np.any(_core.model_vector(data, "mean") != 0)))
        if "frequencies" in params:
            hyper["n_features"] = int(params["frequencies"])
    elif kind == "kernel-ridge":
        est.model_ = data
        est.n_features_in_ = int(params["n_features"])
        # The file keeps the intercept's value, not the flag: 0 reads as no intercept.
        hyper.update(fit_intercept=float(params.get("intercept", 0.0)) != 0.0)
    est.set_params(**{k: v for k, v in hyper.items() if k in settable and v is not None})
    return est


def load(path):
    """A model file (or a ``stolr`` fit's ``--out`` folder) as a fitted estimator.

    ``path``: the ``model.npz`` that ``save`` or a ``stolr`` fit wrote, or the fit's folder; a
    kernel PCA model written in parts under ``mpirun`` (``model.npz`` listing
    ``model.part-R-of-P.npz``) is read part by part and joined into one model.
    Returns a ``PCA``, ``KernelPCA``, ``KernelRidge`` or (for a random-feature kernel PCA,
    ``stolr kpca --solver streaming-rff``) an ``IncrementalKernelPCA`` whose hyperparameters are those the
    file records (solver, ``n_components``, ``center``, the kernel as ``kernel``/``gamma``/
    ``degree``/``coef0``, ``fit_intercept``) and whose fitted attributes are set
    (``components_``, ``explained_variance_``, ``explained_variance_ratio_``,
    ``singular_values_``, ``mean_`` of a PCA; ``eigenvalues_`` of a kernel PCA; ``n_features_in_``
    of every one). ``ValueError`` for a file that is not a fitted model (a solver checkpoint).
    """
    import os
    if os.path.isdir(path):
        path = os.path.join(path, "model.npz")
    with open(path, "rb") as f:
        data = f.read()
    kind = _core.model_kind(data)
    if kind == "kernel-pca-parts":
        # A kernel PCA model in parts (fitted under mpirun): its parts joined into one model.
        data = bytes(_core.join_kernel_pca_parts(path))
        kind = "kernel-pca"
    estimators = {"kernel-pca": KernelPCA, "pca": PCA, "kernel-ridge": KernelRidge,
                  "rff-kernel-pca": IncrementalKernelPCA}
    if kind not in estimators:
        what = "a solver checkpoint" if ("checkpoint" in kind or "state" in kind) else f"a '{kind}' file"
        raise ValueError(f"{path} is {what}, not a fitted model (kernel-pca, rff-kernel-pca, pca or kernel-ridge); "
                         "resume a checkpoint with the stolr command's --checkpoint")
    return _restore(estimators[kind](), kind, data)
