"""Which labels are wrong? Training examples ranked by how likely their label is wrong, from what the paper's
methods already compute.

Two sources, one per method of the paper:

* **AUX's variables** (eq. (4)): training f(θ, xᵢ) + λbᵢ against the noisy label ỹᵢ, the variable bᵢ absorbs
  what the network does not fit, λbᵢ ≈ ỹᵢ − f(θ, xᵢ). A correct label leaves it near 0; a wrong one pushes it
  towards the given label: ỹᵢbᵢ (±1 labels, one output) or bᵢ[ỹᵢ] above the example's other entries (classes,
  one output each) is the score (:func:`from_aux`).
* **Kernel ridge regression's residuals** (Theorem 4.1: the network RDI or AUX trains is, in the NTK regime,
  f* = K(K + λ²I)⁻¹ỹ): the residual ỹᵢ − f*(xᵢ) = λ²αᵢ with α = (K + λ²I)⁻¹ỹ, and its exact leave-one-out form
  ỹᵢ − f₋ᵢ(xᵢ) = αᵢ / [(K + λ²I)⁻¹]ᵢᵢ — the label against what the other n − 1 examples predict for xᵢ, from one
  factorisation (:func:`from_kernel`). A kernel on disk (a ``.npy`` path) gives the residual score, solved out of
  core; the leave-one-out form needs the inverse's diagonal and is in memory only.

Each returns :class:`LabelIssues`: the scores (higher: more likely wrong), the ranking, and how many labels are
likely wrong — from the flip rate or transition matrix when the caller knows it, else estimated (the examples
whose label the method's own prediction contradicts) and said so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import scipy.linalg

from ._checks import as_float64_array, check_lam, check_rate, check_transition_matrix
from ._typing import ArrayLike

__all__ = ["LabelIssues", "from_aux", "from_kernel", "expected_wrong", "label_targets"]


@dataclass(frozen=True)
class LabelIssues:
    """Training examples scored by how likely their label is wrong.

    Attributes
    ----------
    scores : numpy.ndarray
        Higher: more likely wrong; shape ``(n,)``.
    ranking : numpy.ndarray
        Example indices, most suspicious first (ties kept in index order); shape ``(n,)``.
    n_wrong : int
        How many labels are likely wrong.
    n_wrong_source : str
        Where ``n_wrong`` comes from: ``"flip rate"``, ``"transition matrix"`` (given by the caller) or
        ``"estimated"`` (the examples whose label the method's own prediction contradicts).
    method : str
        Which score: ``"aux"``, ``"residual"`` or ``"leave-one-out"``.
    suggested : numpy.ndarray or None
        The label the method's own prediction gives each example, shape ``(n,)`` (the sign for ±1 labels, the
        argmax for classes): what relabelling a flagged example would use. The leave-one-out or fitted KRR output
        for :func:`from_kernel`, the network's ``outputs`` for :func:`from_aux` (``None`` without them).
    """

    scores: np.ndarray
    ranking: np.ndarray
    n_wrong: int
    n_wrong_source: str
    method: str
    suggested: np.ndarray | None = None

    @property
    def flagged(self) -> np.ndarray:
        """The ``n_wrong`` most suspicious examples, most suspicious first."""
        return self.ranking[: self.n_wrong]

    def top(self, k: int) -> np.ndarray:
        """The ``k`` most suspicious examples, most suspicious first."""
        return self.ranking[: max(int(k), 0)]

    def __str__(self) -> str:
        head = ", ".join(str(int(i)) for i in self.top(10))
        return (
            f"{self.n_wrong} of {len(self.scores)} labels likely wrong ({self.n_wrong_source}; score: {self.method}); "
            f"the most suspicious: {head}{', …' if len(self.scores) > 10 else ''}"
        )


def expected_wrong(
    labels: ArrayLike, *, flip_rate: float | None = None, transition: ArrayLike | None = None
) -> tuple[int, str] | None:
    """How many of ``labels`` a known noise process made wrong, in expectation: ``round(p·n)`` for a flip rate
    p (Theorem 5.2's process), or Σᵢ (1 − P[ỹᵢ, ỹᵢ]) for a transition matrix P[noisy, clean] (Section 3.1), the
    noisy labels standing in for the clean ones (exact for symmetric noise). ``None`` when neither is given."""
    if flip_rate is not None and transition is not None:
        raise ValueError("give the flip rate (binary labels) or the transition matrix (classes), not both")
    y = np.asarray(labels).reshape(-1)
    if flip_rate is not None:
        return int(round(check_rate(flip_rate, "flip_rate") * y.size)), "flip rate"
    if transition is not None:
        P = check_transition_matrix(transition, "transition")
        classes = _class_labels(y, P.shape[0])
        return int(round(float(np.sum(1.0 - np.diag(P)[classes])))), "transition matrix"
    return None


def _class_labels(labels: np.ndarray, classes: int) -> np.ndarray:
    if labels.dtype.kind == "f" and not np.all(labels == np.round(labels)):
        raise TypeError("labels must be class indices 0..K-1 or ±1, got non-integer values")
    out = labels.astype(np.int64)
    if out.min() < 0 or out.max() >= classes:
        raise ValueError(f"class labels must lie in 0..{classes - 1}, got {out.min()}..{out.max()}")
    return out


def _binary(labels: np.ndarray) -> bool:
    return bool(np.all(np.isin(labels, (-1.0, 1.0))))


def label_targets(labels: ArrayLike) -> tuple[np.ndarray, np.ndarray, bool]:
    """The regression targets kernel ridge regression fits to the given labels (eq. (9): one column per output).

    Parameters
    ----------
    labels : ArrayLike, shape (n,)
        ±1 labels, or class indices 0..K−1.

    Returns
    -------
    targets : numpy.ndarray, shape (n, 1) or (n, K)
        ±1 labels as one float64 column; classes as one-hot rows of K = the largest class + 1 columns.
    classes : numpy.ndarray, shape (n,)
        Each example's class index (±1 labels: 1 for +1, 0 for −1).
    binary : bool
        Whether the labels are ±1.

    Examples
    --------
    >>> import numpy as np
    >>> Y, classes, binary = label_targets(np.array([2, 0, 1]))
    >>> Y.tolist(), classes.tolist(), binary
    ([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], [2, 0, 1], False)
    >>> label_targets(np.array([1, -1]))[0].ravel().tolist()
    [1.0, -1.0]
    """
    y = as_float64_array(labels, "labels", ndim=1)
    if _binary(y):
        return y[:, None].copy(), (y > 0).astype(np.int64), True
    classes = _class_labels(y, int(y.max()) + 1)
    return np.eye(int(classes.max()) + 1)[classes], classes, False


def _issues(
    scores: np.ndarray, estimated: int, method: str, known: tuple[int, str] | None, prediction: np.ndarray | None
) -> LabelIssues:
    ranking = np.argsort(-scores, kind="stable")
    n_wrong, source = known if known is not None else (estimated, "estimated")
    return LabelIssues(scores, ranking, int(n_wrong), source, method, _suggested(prediction))


def _suggested(prediction: np.ndarray | None) -> np.ndarray | None:
    """The label a prediction of shape (n, 1) (sign, 0 counted as +1) or (n, K) (argmax) gives each example."""
    if prediction is None:
        return None
    if prediction.shape[1] == 1:
        return np.where(prediction[:, 0] >= 0, 1, -1).astype(np.int64)
    return np.argmax(prediction, axis=1).astype(np.int64)


def from_aux(
    variables: Any,
    labels: ArrayLike,
    *,
    outputs: ArrayLike | None = None,
    flip_rate: float | None = None,
    transition: ArrayLike | None = None,
) -> LabelIssues:
    """Score the training labels by AUX's variables after training (eq. (4): λbᵢ ≈ ỹᵢ − f(θ, xᵢ)).

    ±1 labels with one output: the score is ỹᵢbᵢ, the variable's push towards the given label. Class labels
    0..K−1 with K outputs: bᵢ[ỹᵢ] minus the mean of bᵢ's other entries (what AUX added to the given class's
    output, against the others). How many are wrong, unless the noise process is given: the examples whose label
    the network itself contradicts, from its ``outputs`` on the training inputs (sign or argmax against the
    label). (λỹᵢbᵢ > 1 would say the same only once AUX's objective is fitted to the last digit; a run stopped
    earlier has smaller variables, so the network's outputs are asked for instead.)

    Parameters
    ----------
    variables : AuxiliaryVariables, torch.Tensor or ArrayLike, shape (n,) or (n, outputs)
        The trained variables (an :class:`~ntk_core.regularizers.AuxiliaryVariables`, its ``b`` or an array).
    labels : ArrayLike, shape (n,)
        The given (noisy) labels: ±1, or classes 0..K−1.
    outputs : ArrayLike, shape (n,) or (n, K), optional
        The network's own outputs f(θ, xᵢ) on the training inputs (without the variables), for the estimate.
    flip_rate, transition : optional
        The known noise process, for ``n_wrong`` (:func:`expected_wrong`).

    Returns
    -------
    LabelIssues

    Raises
    ------
    ValueError
        Neither ``outputs`` nor a noise process (nothing to count the wrong labels by), or shapes that do not
        match.
    """
    b_raw = getattr(variables, "b", variables)
    b = as_float64_array(b_raw.detach() if hasattr(b_raw, "detach") else b_raw, "variables", ndim=(1, 2))
    b = b.reshape(len(b), -1)
    y = as_float64_array(labels, "labels", ndim=1)
    if len(y) != len(b):
        raise ValueError(f"labels has {len(y)} entries, the variables {len(b)} rows: one per training example")
    known = expected_wrong(y, flip_rate=flip_rate, transition=transition)
    if outputs is None and known is None:
        raise ValueError(
            "give outputs (the network's own outputs on the training inputs) or the noise process (flip_rate or "
            "transition), to count the wrong labels"
        )
    f = None
    if outputs is not None:
        f = as_float64_array(getattr(outputs, "detach", lambda: outputs)(), "outputs", ndim=(1, 2))
        f = f.reshape(len(f), -1)
        if f.shape != b.shape:
            raise ValueError(f"outputs has shape {f.shape}, the variables {b.shape}: one row per example each")
    if b.shape[1] == 1:
        if not _binary(y):
            raise ValueError("one variable per example goes with ±1 labels; class labels need one per class")
        scores = y * b[:, 0]
        estimated = int(np.sum(y * f[:, 0] < 0)) if f is not None else 0
        return _issues(scores, estimated, "aux", known, f)
    classes = _class_labels(y, b.shape[1])
    rows = np.arange(len(b))
    scores = b[rows, classes] - (b.sum(axis=1) - b[rows, classes]) / (b.shape[1] - 1)
    estimated = int(np.sum(np.argmax(f, axis=1) != classes)) if f is not None else 0
    return _issues(scores, estimated, "aux", known, f)


def from_kernel(
    K: Any,
    labels: ArrayLike,
    lam: float,
    *,
    method: Literal["leave-one-out", "residual"] = "leave-one-out",
    flip_rate: float | None = None,
    transition: ArrayLike | None = None,
) -> LabelIssues:
    """Score the training labels by kernel ridge regression on them (eq. (8), ridge λ²).

    With α = (K + λ²I)⁻¹Ỹ (Ỹ: the ±1 labels, or one-hot classes), ``"residual"`` scores how far the fit is from
    each label, ``"leave-one-out"`` (the default) how far the prediction of the other n − 1 examples is, exactly:
    f₋ᵢ(xᵢ) = ỹᵢ − αᵢ / [(K + λ²I)⁻¹]ᵢᵢ. ±1 labels: the score is the margin against the label, −ỹᵢf(xᵢ) (with f
    the fit or the leave-one-out prediction); classes: the best other class's output minus the given one's. The
    estimate of how many are wrong: the examples whose label that prediction contradicts (score > 0).

    Parameters
    ----------
    K : ArrayLike, KernelMatrix or a ``.npy`` path, shape (n, n)
        The kernel k(X, X) (an empirical NTK, an infinite-width kernel). On disk: ``"residual"`` only, solved
        out of core (:func:`ntk_core.kernel_matrix.on_disk.krr_solve_ooc`).
    labels : ArrayLike, shape (n,)
        The given (noisy) labels: ±1, or classes 0..K−1.
    lam : float
        λ ≥ 0 (0 needs K positive definite).
    method : {"leave-one-out", "residual"}
        Which prediction the labels are held against.
    flip_rate, transition : optional
        The known noise process, for ``n_wrong`` (:func:`expected_wrong`).

    Returns
    -------
    LabelIssues
    """
    from .kernel_matrix import DenseKernel, as_kernel_matrix

    lam = check_lam(lam, "lam")
    if method not in ("leave-one-out", "residual"):
        raise ValueError(f"method must be 'leave-one-out' or 'residual', got {method!r}")
    y = as_float64_array(labels, "labels", ndim=1)
    known = expected_wrong(y, flip_rate=flip_rate, transition=transition)
    Km = as_kernel_matrix(K)
    if Km.n != len(y):
        raise ValueError(f"labels has {len(y)} entries, K is {Km.n} x {Km.n}: one label per row of K")
    Y, classes, _ = label_targets(y)
    if method == "residual":
        fit = Y - lam**2 * np.asarray(Km.ridge_solve(Y, lam)).reshape(Y.shape)
        prediction = fit
    else:
        if not isinstance(Km, DenseKernel):
            raise ValueError(
                "the leave-one-out score needs the diagonal of (K + λ²I)⁻¹, computed in memory: load K, or use "
                "method='residual' for a K on disk"
            )
        A = Km.array + lam**2 * np.eye(Km.n)
        try:
            factor = scipy.linalg.cho_factor(A, lower=True, check_finite=False)
        except np.linalg.LinAlgError:
            raise ValueError(
                f"K + λ²I (λ = {lam:g}) is not positive definite: take λ > 0 (or check that K is a kernel matrix)"
            ) from None
        alpha = scipy.linalg.cho_solve(factor, Y, check_finite=False)
        inverse_diagonal = np.diag(scipy.linalg.cho_solve(factor, np.eye(Km.n), check_finite=False))
        prediction = Y - alpha / inverse_diagonal[:, None]
    if Y.shape[1] == 1:
        scores = -y * prediction[:, 0]
    else:
        given = prediction[np.arange(len(y)), classes]
        masked = prediction.copy()
        masked[np.arange(len(y)), classes] = -np.inf
        scores = masked.max(axis=1) - given
    return _issues(scores, int(np.sum(scores > 0)), method, known, prediction)
