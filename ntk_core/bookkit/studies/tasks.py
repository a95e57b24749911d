"""The binary task of Setting 1 and of Section 5's chapters: MNIST "5" (+1) against "8" (−1).

Every chapter that measures a bound on real data draws the same task the same way: a training pool of ``5``\\s
and ``8``\\s (half of each, shuffled, so that its first ``n`` images are a sample of size ``n`` for every
``n``), a test sample from the test split, both as :func:`ntk_core.data.sphere_features` (each image scaled to
norm √d, so that the Setting-1 kernel has ``k(x, x) = 1/2`` and ``tr K = n/2``). Sizes are capped by the data at
hand: with the full MNIST nothing changes, with the embedded subset (400 training and 100 test digits per
class) the chapters still run, on fewer images.

The whole task, every "5" and "8" of a split with its ±1 labels, is the library's
:func:`ntk_core.data.mnist_5_vs_8`; this module draws the chapters' balanced, nested samples from it the way the
chapters always have (:func:`ntk_core.data.sample_classes` on the split's labels, so their numbers stay put).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ... import data

__all__ = ["FiveVsEight", "five_vs_eight", "CLASSES"]

#: The two digits of the task, the first labelled +1, the second −1.
CLASSES = (5, 8)


@dataclass(frozen=True)
class FiveVsEight:
    """A draw of the "5" vs "8" task (:func:`five_vs_eight`).

    Attributes
    ----------
    images : numpy.ndarray
        The training pool's raw images, shape ``(n_pool, 28, 28)`` (the first ``n`` are a sample of size ``n``).
    x : numpy.ndarray
        Their sphere features (norm √784), shape ``(n_pool, 784)``.
    y : numpy.ndarray
        Their labels, +1.0 for a "5", −1.0 for an "8", shape ``(n_pool,)``.
    x_test : numpy.ndarray
        The test sample's sphere features, shape ``(n_test, 784)`` (empty when none was asked for).
    y_test : numpy.ndarray
        Its ±1 labels, shape ``(n_test,)``.
    available : int
        The most training images the data at hand gives the task (twice the count of the rarer digit): the
        largest size a chapter may ask for.
    """

    images: np.ndarray
    x: np.ndarray
    y: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    available: int
    _train: Any = field(repr=False)

    @property
    def n(self) -> int:
        """The size of the training pool."""
        return len(self.y)

    def resample(self, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """Another training pool of the same size (features and ±1 labels), drawn with ``seed``."""
        idx = data.sample_classes(self._train.labels, CLASSES, self.n // 2, seed=seed)
        return data.sphere_features(self._train.images[idx]), _pm1(self._train.labels[idx])


def _pm1(labels: np.ndarray) -> np.ndarray:
    return np.where(labels == CLASSES[0], 1.0, -1.0)


def five_vs_eight(pool: int, n_test: int = 0, run: Any = None, seed: int = 0, test_seed: int = 1) -> FiveVsEight:
    """Draw the "5" vs "8" task: a nested training pool of ``pool`` images and ``n_test`` test images, each capped
    by the data at hand (half of each digit; an odd size is rounded down to even).

    Parameters
    ----------
    pool, n_test : int
        Training pool and test sample sizes asked for (a pool of at least 2, one image of each digit; no test
        sample by default).
    run : RunInfo, optional
        A chapter's :class:`ntk_core.experiments.profile.RunInfo`: the data sources are added to it.
    seed, test_seed : int
        Seeds of the training pool's and of the test sample's draws.
    """
    if pool < 2 or n_test < 0:
        raise ValueError(
            f"five_vs_eight: the pool needs at least 2 images (one of each digit) and n_test must be 0 or more, got "
            f"pool = {pool}, n_test = {n_test}"
        )
    train, test = data.load_mnist("train"), data.load_mnist("test")
    if run is not None:
        run.add_data(train.describe())
        run.add_data(test.describe())
    available = 2 * data.available_pairs(train.labels, CLASSES)
    n_pool, n_test = min(pool, available), min(n_test, 2 * data.available_pairs(test.labels, CLASSES))
    idx = data.sample_classes(train.labels, CLASSES, n_pool // 2, seed=seed)
    x = data.sphere_features(train.images[idx])
    if n_test >= 2:
        idx_t = data.sample_classes(test.labels, CLASSES, n_test // 2, seed=test_seed)
        x_test, y_test = data.sphere_features(test.images[idx_t]), _pm1(test.labels[idx_t])
    else:
        x_test, y_test = np.empty((0, x.shape[1])), np.empty(0)
    return FiveVsEight(train.images[idx], x, _pm1(train.labels[idx]), x_test, y_test, available, train)
