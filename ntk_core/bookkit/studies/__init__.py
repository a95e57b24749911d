"""Measurements behind the book's chapters: seconds-long studies of Sections 3–5 and Appendices A–C.

What goes here and what goes in :mod:`ntk_core.experiments`: a measurement that takes seconds, runs at one size
and is recomputed by every build is a study; a computation with ``quick``/``medium``/``full`` sizes, resumable
units, a cache and recorded results is an experiment. Nothing here states a bound (:mod:`ntk_core.bounds`) or
solves a regression (:mod:`ntk_core.krr`): the studies *measure*.

* :mod:`~ntk_core.bookkit.studies.lemmas`: Monte Carlo over label-noise draws for Lemmas C.1 and C.2, the
  Hsu–Kakade–Zhang and Rademacher bounds, and the proofs' closed-form fits;
* :mod:`~ntk_core.bookkit.studies.errors`: clean errors of KRR trained on noisy labels (Theorems 5.1–5.3);
* :mod:`~ntk_core.bookkit.studies.wide`: wide networks against their kernel (width sweeps, Theorem 4.1's
  training against KRR, the difference trick);
* :mod:`~ntk_core.bookkit.studies.scaling`: power-law fits, and the growth of the bounds up to the full data;
* :mod:`~ntk_core.bookkit.studies.own_loop`: RDI and AUX in a user's own training loop;
* :mod:`~ntk_core.bookkit.studies.tasks`: the "5" vs "8" task that Section 5's chapters measure on.

The functions of the first four, and the task, are re-exported here (``from ntk_core.bookkit import studies``;
``studies.lemma_monte_carlo(...)``).
"""

from .errors import additive_test_loss, binary_error_grid, mean_noisy_onehot, multiclass_error_grid
from .lemmas import (
    FitMonteCarlo,
    LemmaC2Chain,
    LemmaMonteCarlo,
    fit_monte_carlo,
    lemma_c1_pieces,
    lemma_c2_chain,
    lemma_monte_carlo,
    rademacher_monte_carlo,
    ridge_fit,
)
from .scaling import bound_growth, growth_fit, loglog_slope
from .tasks import FiveVsEight, five_vs_eight
from .wide import TrainVsKRR, WidthSweep, initial_output_effect, ntk_width_sweep, train_vs_krr

__all__ = [
    "FiveVsEight",
    "five_vs_eight",
    "additive_test_loss",
    "binary_error_grid",
    "mean_noisy_onehot",
    "multiclass_error_grid",
    "FitMonteCarlo",
    "LemmaC2Chain",
    "LemmaMonteCarlo",
    "fit_monte_carlo",
    "lemma_c1_pieces",
    "lemma_c2_chain",
    "lemma_monte_carlo",
    "rademacher_monte_carlo",
    "ridge_fit",
    "bound_growth",
    "growth_fit",
    "loglog_slope",
    "TrainVsKRR",
    "WidthSweep",
    "initial_output_effect",
    "ntk_width_sweep",
    "train_vs_krr",
]
