"""Planted bugs for the mutation run (``make mutation``, ``python mutation/run.py``).

Each :class:`Mutant` replaces one exact snippet of one source file (it must occur exactly
once, so the list cannot rot silently: ``tests/test_mutation.py`` checks it on every
``make test``). The kinds are the ones a reader of the paper could plausibly get wrong:
λ for λ², floor for round, a constant of a bound term halved, doubled or tripled, δ for δ/3
or δ/K, P for Pᵀ, a dropped factor of the RDI penalty, AUX without λ, the Setting 1 KRR
baseline on the wrong labels, an augmentation that never runs, and so on.

A mutant with ``equivalent`` set changes no observable behaviour (the string says why); it
is run and reported but may survive. Every other mutant must be killed by the fast tests
named in ``tests`` (default: :data:`DEFAULT_TESTS` of its file).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_TESTS", "MUTANTS", "Mutant"]

#: The fast tests run against a mutant of each source file.
DEFAULT_TESTS: dict[str, tuple[str, ...]] = {
    "ntk_core/bounds.py": ("tests/test_bounds.py",),
    "ntk_core/krr.py": ("tests/test_krr.py",),
    "ntk_core/kernel_matrix/dense.py": ("tests/test_krr.py",),
    "ntk_core/noise.py": ("tests/test_noise.py",),
    "ntk_core/infinite.py": ("tests/test_infinite.py",),
    "ntk_core/ntk/problem.py": ("tests/test_ntk.py",),
    "ntk_core/ntk/tiles.py": ("tests/test_ntk.py",),
    "ntk_core/ntk/structured.py": ("tests/test_structured.py", "tests/test_ntk.py"),
    "ntk_core/train.py": ("tests/test_train.py",),
    "ntk_core/regularizers.py": ("tests/test_regularizers.py", "tests/test_train.py"),
    "ntk_core/resnet.py": ("tests/test_train.py", "tests/test_experiment_values.py"),
    "ntk_core/experiments/setting1.py": ("tests/test_experiment_values.py",),
    "ntk_core/experiments/setting3.py": ("tests/test_experiment_values.py",),
    "ntk_core/experiments/distance.py": ("tests/test_experiment_values.py",),
    "ntk_core/bookkit/claims.py": ("tests/test_claims.py",),
    "ntk_core/bookkit/sampling.py": ("tests/test_sampling.py", "tests/test_claims.py"),
    "ntk_core/bookkit/ledger.py": ("tests/test_report.py",),
    "ntk_core/bookkit/verdicts.py": ("tests/test_verdicts.py",),
}


@dataclass(frozen=True)
class Mutant:
    """One planted bug: in ``file``, ``original`` (exactly once) becomes ``replacement``."""

    name: str
    file: str
    original: str
    replacement: str
    description: str
    equivalent: str | None = None
    tests: tuple[str, ...] = ()

    @property
    def test_files(self) -> tuple[str, ...]:
        return self.tests or DEFAULT_TESTS[self.file]


B, KRR, NOISE, INF, TRAIN, REG = (
    f"ntk_core/{m}.py" for m in ("bounds", "krr", "noise", "infinite", "train", "regularizers")
)
KERNEL_MATRIX = "ntk_core/kernel_matrix/dense.py"
NTK_PROBLEM, NTK_TILES, NTK_STRUCTURED = (f"ntk_core/ntk/{m}.py" for m in ("problem", "tiles", "structured"))
S1, S3, DIST = (f"ntk_core/experiments/{m}.py" for m in ("setting1", "setting3", "distance"))
CLAIMS, LEDGER, SAMPLING = (f"ntk_core/bookkit/{m}.py" for m in ("claims", "ledger", "sampling"))

MUTANTS: tuple[Mutant, ...] = (
    # ------------------------------------------------------------------ bounds: Hsu–Kakade–Zhang, eq. (12)
    Mutant(
        "hkz-sqrt-term-halved",
        B,
        "2.0 * math.sqrt(float(np.sum(sv**2)) * L)",
        "math.sqrt(float(np.sum(sv**2)) * L)",
        "HKZ: 2√(tr Σ² log) term halved",
    ),
    Mutant(
        "hkz-norm-term-halved",
        B,
        "2.0 * float(sv.max(initial=0.0)) * L",
        "float(sv.max(initial=0.0)) * L",
        "HKZ: 2‖Σ‖log term halved",
    ),
    Mutant(
        "hkz-sigma-is-A",
        B,
        "sv = np.linalg.svd(Am, compute_uv=False) ** 2",
        "sv = np.linalg.svd(Am, compute_uv=False)",
        "HKZ: eigenvalues of A instead of Σ = AᵀA",
    ),
    # ------------------------------------------------------------------ Lemmas C.1, C.2
    Mutant(
        "c1-bias-lambda-squared",
        B,
        "bias=0.5 * lam * math.sqrt(",
        "bias=0.5 * lam**2 * math.sqrt(",
        "Lemma C.1 bias: λ² for λ",
    ),
    Mutant(
        "c1-noise-doubled",
        B,
        "noise=sigma / (2.0 * lam) * math.sqrt(",
        "noise=sigma / lam * math.sqrt(",
        "Lemma C.1 noise: σ/λ for σ/(2λ)",
    ),
    Mutant(
        "c1-tail-no-2",
        B,
        "tail=sigma * math.sqrt(2.0 * _log_inv(delta)),",
        "tail=sigma * math.sqrt(_log_inv(delta)),",
        "Lemma C.1 tail: √log for √(2 log)",
    ),
    Mutant(
        "c2-noise-lambda-squared",
        B,
        "noise=sigma * math.sqrt(n) / lam,",
        "noise=sigma * math.sqrt(n) / lam**2,",
        "Lemma C.2 noise: σ√n/λ² for σ√n/λ",
    ),
    Mutant(
        "c2-tail-no-lambda",
        B,
        "tail=sigma / lam * math.sqrt(2.0 * _log_inv(delta)),",
        "tail=sigma * math.sqrt(2.0 * _log_inv(delta)),",
        "Lemma C.2 tail: 1/λ dropped",
    ),
    Mutant(
        "ridge-complexity-lambda",
        B,
        'return float(Km.ridge_quadratic(check_rows(y, Km.n, "y", ndim=1), check_lam(lam, "lam")))',
        'return float(Km.ridge_quadratic(check_rows(y, Km.n, "y", ndim=1), check_lam(lam, "lam") ** 0.5))',
        "yᵀ(K + λ I)⁻¹y instead of yᵀ(K + λ² I)⁻¹y",
    ),
    # ------------------------------------------------------------------ Theorem 5.1 machinery
    Mutant(
        "t51-c1-delta-not-thirds",
        B,
        "lc1 = _lemma_c1(comp, trace, lam, sigma, delta / 3.0)",
        "lc1 = _lemma_c1(comp, trace, lam, sigma, delta)",
        "Theorem 5.1: Lemma C.1 at δ, not δ/3",
    ),
    Mutant(
        "t51-c2-delta-not-thirds",
        B,
        "lc2 = _lemma_c2(ridge, n, lam, sigma, delta / 3.0)",
        "lc2 = _lemma_c2(ridge, n, lam, sigma, delta)",
        "Theorem 5.1: Lemma C.2 at δ, not δ/3",
    ),
    Mutant("t51-rademacher-halved", B, "rad = 2.0 * tau / n", "rad = tau / n", "2R̂ → R̂ in the Rademacher terms"),
    Mutant(
        "t51-net-floor",
        B,
        "N = math.ceil(label_bound * math.sqrt(n) / (lam * eps_net))",
        "N = math.floor(label_bound * math.sqrt(n) / (lam * eps_net))",
        "ε-net size: floor for ceil",
    ),
    Mutant("t51-net-lambda-squared", B, "/ (lam * eps_net))", "/ (lam**2 * eps_net))", "ε-net size: λ² for λ"),
    Mutant(
        "t51-concentration-third",
        B,
        "concentration=3.0 * loss_bound *",
        "concentration=loss_bound *",
        "concentration term: constant 3 dropped",
    ),
    Mutant(
        "t51-concentration-log2",
        B,
        "math.log(6.0 * (N + 1) / delta)",
        "math.log(2.0 * (N + 1) / delta)",
        "concentration: log(2(N+1)/δ) instead of log(6(N+1)/δ) (δ/3 lost)",
    ),
    Mutant("t51-net-size-off-by-one", B, "net_size=N + 1,", "net_size=N,", "net has N points, not N + 1"),
    Mutant(
        "t51-net-rounding-term",
        B,
        "rademacher_net=rad * eps_net,",
        "rademacher_net=rad,",
        "net rounding term without ε",
    ),
    Mutant(
        "t51-train-bias-over-n",
        B,
        "train_bias=lc1.bias / math.sqrt(n),",
        "train_bias=lc1.bias / n,",
        "training bias divided by n instead of √n",
    ),
    Mutant(
        "t51-train-tail-tripled",
        B,
        "train_tail=lc1.tail / math.sqrt(n),",
        "train_tail=3.0 * lc1.tail / math.sqrt(n),",
        "training tail tripled",
    ),
    Mutant(
        "t51-rademacher-noise-doubled",
        B,
        "rademacher_noise=rad * lc2.noise,",
        "rademacher_noise=2.0 * rad * lc2.noise,",
        "Rademacher noise term doubled",
    ),
    # ------------------------------------------------------------------ Theorem 5.2
    Mutant(
        "t52-labels-not-rescaled",
        B,
        "        scale * yy,\n        lam,\n        sigma,",
        "        yy * 1.0,\n        lam,\n        sigma,",
        "Theorem 5.2 on y, not ȳ = (1 − 2p)y",
    ),
    Mutant(
        "t52-loss-range-one",
        B,
        "label_bound=scale,\n        loss_bound=scale,\n",
        "label_bound=scale,\n        loss_bound=1.0,\n",
        "ramp loss range 1 instead of 1 − 2p",
    ),
    Mutant("t52-no-rescale", B, "rescale=1.0 / scale", "rescale=1.0", "error bound not divided by 1 − 2p"),
    Mutant(
        "t52-sigma-sqrt-p",
        B,
        "return 2.0 * centred_bernoulli_subgaussian_sigma(p)",
        "return math.sqrt(p)",
        "binary noise σ = √p (the paper's claim) instead of σ_p",
    ),
    Mutant(
        "bernoulli-sigma-no-2",
        B,
        "return math.sqrt((1.0 - 2.0 * q) / (2.0 * (math.log1p(-q) - math.log(q))))",
        "return math.sqrt((1.0 - 2.0 * q) / (math.log1p(-q) - math.log(q)))",
        "Kearns–Saul σ² without the 1/2",
    ),
    Mutant(
        "t52-ramp-slope",
        B,
        "np.clip(s - uu * (s * yy) / s, 0.0, s)",
        "np.clip(s - uu * (s * yy), 0.0, s)",
        "ramp loss slope 1 instead of 1/(1 − 2p)",
    ),
    # ------------------------------------------------------------------ Theorem 5.3
    Mutant(
        "t53-sigma-columns",
        B,
        "return np.max(sig, axis=1)",
        "return np.max(sig, axis=0)",
        "σ_h: max over column h (Pᵀ) instead of row h",
    ),
    Mutant(
        "gap-transposed",
        B,
        "return float(np.min(diag - np.max(off, axis=0)))",
        "return float(np.min(diag - np.max(off, axis=1)))",
        "gap(P) read by rows (Pᵀ)",
    ),
    Mutant(
        "q-matrix-transposed",
        B,
        "return Pm[:, check_class_labels(arr, k)]",
        "return Pm[check_class_labels(arr, k), :].T",
        "Q = Pᵀ·Y instead of P·Y",
    ),
    Mutant(
        "t53-q-transposed",
        B,
        "return Km, Pm, Pm[:, c], g,",
        "return Km, Pm, Pm[c, :].T, g,",
        "Theorem 5.3 clean labels q from Pᵀ",
    ),
    Mutant(
        "t53-delta-not-over-k",
        B,
        "            delta / k,\n            eps_net,\n",
        "            delta,\n            eps_net,\n",
        "Theorem 5.3 per output at δ, not δ/K",
    ),
    Mutant(
        "t53-no-gap",
        B,
        "return sum(b.total for b in self.per_output) / self.gap",
        "return sum(b.total for b in self.per_output)",
        "Theorem 5.3 total not divided by gap",
    ),
    # ------------------------------------------------------------------ printed forms
    Mutant(
        "printed-leading-lambda-squared",
        B,
        "0.5 * (lam + C) * sqrt_complexity_over_n,",
        "0.5 * (lam**2 + C) * sqrt_complexity_over_n,",
        "printed leading term (λ² + C)/2",
    ),
    Mutant(
        "printed-noise-tail",
        B,
        "C * sigma / lam * math.sqrt(L / n),",
        "C * sigma * math.sqrt(L / n),",
        "printed (σ/λ)√(log/n) term without 1/λ",
    ),
    Mutant(
        "printed-net-no-lambda",
        B,
        "C * math.sqrt(max(math.log(n / (delta * lam)), 0.0) / n),",
        "C * math.sqrt(max(math.log(n / delta), 0.0) / n),",
        "printed net term log(n/δ), λ dropped",
    ),
    Mutant(
        "printed-52-sigma-p",
        B,
        "n, lam, math.sqrt(p), delta, C",
        "n, lam, p, delta, C",
        "printed 5.2 with σ = p instead of √p",
    ),
    Mutant(
        "printed-52-tail-not-rescaled",
        B,
        'PrintedBound("5.2", C, lead, r * noise, r * tail, 0.0, r * net,',
        'PrintedBound("5.2", C, lead, r * noise, tail, 0.0, r * net,',
        "printed 5.2 tail not divided by 1 − 2p",
    ),
    Mutant(
        "printed-53-delta",
        B,
        "_printed_terms(0.0, n, lam, 1.0, delta / k, C)",
        "_printed_terms(0.0, n, lam, 1.0, delta, C)",
        "printed 5.3 at δ instead of δ' = δ/K",
    ),
    Mutant("printed-53-no-k", B, "k * noise / g", "noise / g", "printed 5.3 noise term without the factor K"),
    # ------------------------------------------------------------------ krr
    Mutant(
        "krr-ridge-lambda", KERNEL_MATRIX, "K + lam**2 * np.eye(n)", "K + lam * np.eye(n)", "KRR ridge λ I for λ² I"
    ),
    Mutant(
        "krr-path-lambda",
        KRR,
        "denom = self.eigenvalues + lam**2",
        "denom = self.eigenvalues + lam",
        "KRR path ridge λ for λ²",
    ),
    Mutant(
        "lr-bound-lambda",
        KRR,
        "return 1.0 / (float(np.linalg.norm(Km, 2)) + lam**2)",
        "return 1.0 / (float(np.linalg.norm(Km, 2)) + lam)",
        "Theorem 4.1 η ≤ 1/(‖K‖ + λ)",
    ),
    Mutant(
        "linear-rate-lambda",
        KRR,
        "return max(abs(1.0 - eta * lam**2), abs(1.0 - eta * top))",
        "return max(abs(1.0 - eta * lam), abs(1.0 - eta * top))",
        "contraction 1 − ηλ",
    ),
    Mutant(
        "gd-rdi-params-lambda",
        KRR,
        "grad = Zm.T @ (Zm @ d - yy) + lam**2 * d",
        "grad = Zm.T @ (Zm @ d - yy) + lam * d",
        "RDI gradient λ(θ − θ0)",
    ),
    Mutant(
        "gd-aux-params-no-lambda",
        KRR,
        "return theta - eta * (Zm.T @ a), b - eta * lam * a",
        "return theta - eta * (Zm.T @ a), b - eta * a",
        "AUX: b update without λ",
    ),
    Mutant(
        "gd-rdi-kernel-lambda",
        KRR,
        "return (alpha - eta * (Km @ alpha - yy + lam**2 * alpha),)",
        "return (alpha - eta * (Km @ alpha - yy + lam * alpha),)",
        "function-space RDI with λ",
    ),
    Mutant(
        "gd-aux-kernel-no-lambda",
        KRR,
        "a = Km @ alpha + lam * b - yy",
        "a = Km @ alpha + b - yy",
        "function-space AUX residual without λ",
    ),
    Mutant("closed-form-lambda", KRR, "h = s + lam**2", "h = s + lam", "closed form with λ for λ²"),
    # ------------------------------------------------------------------ noise
    Mutant(
        "exact-flips-floor",
        NOISE,
        "size=int(round(p * n))",
        "size=int(p * n)",
        "exact noise: floor(p·n) instead of round(p·n)",
    ),
    Mutant(
        "corrupt-transposed",
        NOISE,
        "cdf = np.cumsum(P, axis=0)",
        "cdf = np.cumsum(P.T, axis=0)",
        "corrupt draws from rows of P (Pᵀ)",
    ),
    Mutant(
        "symmetric-over-k",
        NOISE,
        "P = np.full((K, K), r / (K - 1))",
        "P = np.full((K, K), r / K)",
        "symmetric noise r/K off the diagonal",
    ),
    Mutant(
        "pairflip-transposed",
        NOISE,
        "P[(np.arange(K) + 1) % K, np.arange(K)] += r",
        "P[np.arange(K), (np.arange(K) + 1) % K] += r",
        "pair flip c → c − 1 (Pᵀ)",
    ),
    Mutant(
        "empirical-transposed",
        NOISE,
        "np.add.at(counts, (t, c), 1.0)",
        "np.add.at(counts, (c, t), 1.0)",
        "empirical transition counted [clean, noisy]",
    ),
    Mutant(
        "flip-rate-halved",
        NOISE,
        "flip = rng.random(n) < p",
        "flip = rng.random(n) < p / 2",
        "i.i.d. flips at rate p/2",
    ),
    Mutant(
        "flip-strict-inequality",
        NOISE,
        "flip = rng.random(n) < p",
        "flip = rng.random(n) <= p",
        "i.i.d. flip test u ≤ p instead of u < p",
        equivalent="u = rng.random() equals p with probability 0 (a double has 2^-53 resolution): "
        "no draw in any test or experiment changes",
    ),
    # ------------------------------------------------------------------ infinite-width kernels
    Mutant(
        "arccos-dot-no-2",
        INF,
        "sigma_dot = (math.pi - theta) / (2 * math.pi)",
        "sigma_dot = (math.pi - theta) / math.pi",
        "Σ̇ = (π − ϑ)/π",
    ),
    Mutant(
        "arccos-no-sin",
        INF,
        "(np.sin(theta) + (math.pi - theta) * cos)",
        "((math.pi - theta) * cos)",
        "arc-cosine kernel without sin ϑ",
    ),
    Mutant(
        "arccos-diag-not-halved",
        INF,
        "return sigma, sigma_dot, diag1 / 2.0, diag2 / 2.0",
        "return sigma, sigma_dot, diag1, diag2",
        "diagonal not halved per ReLU layer",
    ),
    Mutant(
        "sigma0-not-over-d", INF, "sigma = a @ b.T / d  # Σ^(0)", "sigma = a @ b.T  # Σ^(0)", "Σ^(0) = xᵀx' without 1/d"
    ),
    Mutant(
        "first-is-readout",
        INF,
        'if trained == "first":\n        return {1}',
        'if trained == "first":\n        return {depth + 1}',
        "'first' trains the readout",
    ),
    Mutant(
        "ntk-product-from-next-layer",
        INF,
        "for sigma_dot in dots[layer - 1 :]:",
        "for sigma_dot in dots[layer:]:",
        "NTK term misses Σ̇ of its own layer",
    ),
    # ------------------------------------------------------------------ empirical NTK
    Mutant(
        "ntk-full-axes-swapped",
        NTK_PROBLEM,
        'return torch.einsum("iap,jbp->ijab", j1, j2)',
        'return torch.einsum("iap,jbp->ijba", j1, j2)',
        "full NTK output axes swapped",
    ),
    Mutant(
        "ntk-mirror-no-output-swap",
        NTK_TILES,
        "tile.transpose(0, 1).transpose(2, 3) if tile.ndim == 4 else tile.T",
        "tile.transpose(0, 1) if tile.ndim == 4 else tile.T",
        "mirrored tiles keep output axes",
    ),
    Mutant(
        "ntk-skip-diagonal-tiles",
        NTK_TILES,
        "for j in range(i if symmetric else 0, n_cols):",
        "for j in range(i + 1 if symmetric else 0, n_cols):",
        "diagonal tiles not computed",
    ),
    Mutant(
        "ntk-gram-sum-split",
        NTK_STRUCTURED,
        "blocks.append((uu * gp).sum(dim=(2, 3, 4)))",
        "blocks.append((uu * gp).sum(dim=4).sum(dim=(2, 3)))",
        "sum over the position and group axes done in two steps",
        equivalent="summing axis 4 then (2, 3) equals summing (2, 3, 4) at once (the same sum, reassociated; "
        "differences are float rounding within the tests' tolerances)",
    ),
    # ------------------------------------------------------------------ trainer
    Mutant(
        "rdi-penalty-no-batch-fraction",
        REG,
        "return (size / self.n) * 0.5 * self.lam**2",
        "return 0.5 * self.lam**2",
        "mini-batch RDI penalty without |B|/n",
    ),
    Mutant(
        "rdi-penalty-lambda",
        REG,
        "return (size / self.n) * 0.5 * self.lam**2",
        "return (size / self.n) * 0.5 * self.lam",
        "RDI penalty λ/2 for λ²/2",
    ),
    Mutant(
        "rdi-penalty-no-half",
        REG,
        "return (size / self.n) * 0.5 * self.lam**2",
        "return (size / self.n) * self.lam**2",
        "RDI penalty without 1/2",
    ),
    Mutant(
        "rdi-penalty-weight-decay",
        REG,
        "return sum(((p - self.initial[name]) ** 2).sum()",
        "return sum(((p - 0 * self.initial[name]) ** 2).sum()",
        "RDI as weight decay ‖θ‖² (not ‖θ − θ(0)‖²)",
    ),
    Mutant("aux-no-lambda", REG, "return outputs + self.lam * b\n", "return outputs + b\n", "AUX: f + b_i, λ dropped"),
    Mutant(
        "rdi-mean-penalty-no-n",
        REG,
        "return 0.5 * self.lam**2 / self.n",
        "return 0.5 * self.lam**2",
        "RDI for a mean loss with the sum loss's λ²/2 (not λ²/(2n))",
    ),
    Mutant(
        "aux-error-no-lambda",
        TRAIN,
        "train_out = out + float(config.lam or 0.0) * aux if aux is not None else out",
        "train_out = out + aux if aux is not None else out",
        "AUX's reported error without λ",
    ),
    Mutant(
        "aux-error-without-aux",
        TRAIN,
        "train_out = out + float(config.lam or 0.0) * aux if aux is not None else out",
        "train_out = out",
        "AUX's reported error without the auxiliary variables",
    ),
    Mutant(
        "clean-error-with-aux",
        TRAIN,
        '"train_error_clean": classification_error(out, y_clean)',
        '"train_error_clean": classification_error(train_out, y_clean)',
        "clean error measured with λb",
    ),
    Mutant(
        "l2-loss-no-half",
        TRAIN,
        "return 0.5 * ((out - targets) ** 2).sum()",
        "return ((out - targets) ** 2).sum()",
        "ℓ2 loss without 1/2",
    ),
    Mutant(
        "train-in-eval-mode",
        TRAIN,
        "        model.train()\n        finite = torch.ones(",
        "        model.eval()\n        finite = torch.ones(",
        "training steps in evaluation mode",
    ),
    Mutant(
        "early-stopping-worst",
        TRAIN,
        'best_epoch = int(history.loc[history["val_error"].idxmin(), "epoch"])',
        'best_epoch = int(history.loc[history["val_error"].idxmax(), "epoch"])',
        "early stopping at worst epoch",
    ),
    Mutant(
        "lr-milestones-ignored",
        TRAIN,
        'g["lr"] = config.lr * config.lr_gamma**decays',
        'g["lr"] = config.lr',
        "learning-rate milestones never applied",
    ),
    Mutant(
        "augmentation-never-runs",
        "ntk_core/resnet.py",
        "if not self.training:\n            return x",
        "if True:\n            return x",
        "random crop/flip never runs",
    ),
    # ------------------------------------------------------------------ experiments
    Mutant(
        "s1-krr-clean-labels",
        S1,
        "y_krr = y_noisy.cpu().numpy().astype(np.float64)",
        "y_krr = split.y_train.cpu().numpy().astype(np.float64)",
        "Setting 1 KRR baseline fitted on the clean labels",
    ),
    Mutant(
        "s1-krr-lambda",
        S1,
        "config.lams, K_eval)",
        "[lam ** 0.5 for lam in config.lams], K_eval)",
        "Setting 1 KRR with ridge λ instead of λ²",
    ),
    Mutant(
        "s1-lr-lambda",
        S1,
        "lr = config.lr_scale / (norm_K + (lam or 0.0) ** 2)",
        "lr = config.lr_scale / (norm_K + (lam or 0.0))",
        "Setting 1 learning rate 1/(‖K‖ + λ)",
    ),
    Mutant(
        "s3-no-augmentation",
        S3,
        "return nn.Sequential(RandomCropFlip(seed=10_000 + seed), net) if config.augment else net",
        "return net",
        "Setting 3 network without augmentation",
    ),
    Mutant(
        "s3-lr-not-over-batch",
        S3,
        "lr=config.lr * s / b,",
        "lr=config.lr * s,",
        "Setting 3 learning rate not divided by the batch size (summed loss)",
    ),
    Mutant(
        "s3-aux-decay-not-rescaled",
        S3,
        "aux_weight_decay=0.0 if lam is None else config.aux_weight_decay * b,",
        "aux_weight_decay=0.0 if lam is None else config.aux_weight_decay,",
        "Setting 3 aux weight decay not rescaled to the summed loss",
    ),
    Mutant(
        "s3-exact-floor",
        S3,
        "size=int(round(rate * clean.size))",
        "size=int(rate * clean.size)",
        "Setting 3 exact corruption floor(rate·n)",
    ),
    Mutant(
        "dist-ridge-lambda",
        DIST,
        "alpha = krr_coefficients(K, y, lam or 0.0)",
        "alpha = krr_coefficients(K, y, (lam or 0.0) ** 0.5)",
        "distance prediction with ridge λ instead of λ²",
    ),
    Mutant(
        "dist-lr-lambda",
        DIST,
        'lr = point["lr_scale"] / (eig[-1] + (lam or 0.0) ** 2)',
        'lr = point["lr_scale"] / (eig[-1] + (lam or 0.0))',
        "distance study learning rate 1/(‖K‖ + λ)",
    ),
    Mutant(
        "dist-steps-floor",
        DIST,
        'steps = int(round(config.steps / point["lr_scale"]))',
        'steps = int(config.steps / point["lr_scale"])',
        "distance study steps floor(steps/lr_scale)",
    ),
    # ------------------------------------------------------------------ the book's verdicts (book kit)
    Mutant(
        "tolerance-without-sampling-error",
        SAMPLING,
        'return "exceeds" if value - z * se > tolerance else "unresolved"',
        'return "exceeds"',
        "a tolerance exceeded by less than the sampling error is a finding (the embedded subset's 200 images fail)",
    ),
    Mutant(
        "family-without-bonferroni",
        SAMPLING,
        "return NormalDist().inv_cdf(1.0 - alpha / (2 * int(k)))",
        "return NormalDist().inv_cdf(1.0 - alpha / 2)",
        "a claim over k cells judged with one comparison's z: false findings k times as likely",
    ),
    Mutant(
        "paired-se-ignores-disagreement",
        SAMPLING,
        "        bound = min(bound, disagreement)\n",
        "        bound = bound\n",
        "the bound on how often two classifiers disagree dropped: RDI against AUX judged with e₁ + e₂",
    ),
    Mutant(
        "judge-without-the-test-set",
        CLAIMS,
        '    return math.hypot(stats["sem"], float(stats.get("test_se", 0.0)))\n',
        '    return stats["sem"]\n',
        "a paired-by-seed claim judged on the seeds' spread alone, without the shared test images' own error",
    ),
    Mutant(
        "judge-one-standard-error",
        CLAIMS,
        "    if m > t * se:\n",
        "    if m > se:\n",
        "the verdict rule: a paired claim holds beyond one standard error instead of Student's critical value",
    ),
    Mutant(
        "judge-opposite-without-spread",
        CLAIMS,
        '    return "the opposite holds" if m < -t * se else "inconclusive"',
        '    return "the opposite holds" if m < 0 else "inconclusive"',
        "the verdict rule: any negative mean is 'the opposite holds'",
    ),
    Mutant(
        "first-stage-premise-one-sided",
        CLAIMS,
        'if d["mean"] - 2 * sem <= FIRST_STAGE_DROP:',
        'if d["mean"] <= FIRST_STAGE_DROP:',
        "Appendix D's premise judged failed on the mean drop alone, without its seed noise",
    ),
    Mutant(
        "regime-drift-threshold-x10",
        CLAIMS,
        "REGIME_DRIFT = 0.1\n",
        "REGIME_DRIFT = 1.0\n",
        "the NTK-regime threshold on the kernel drift ten times too lax",
    ),
    Mutant(
        "table-2-rdi-gap-lax",
        CLAIMS,
        'q["rdi_gap"] <= 0.05, value=value',
        'q["rdi_gap"] <= 0.5, value=value',
        "Table 2: GD + RDI within 50 % of its linearised distance counts as the NTK regime",
    ),
    Mutant(
        "verdict-counts-the-books-own-checks",
        "ntk_core/bookkit/verdicts.py",
        '    paper = [c for c in claims if c.kind != "check"]',
        "    paper = list(claims)",
        "an exhibit's verdict counts the book's own premises and sanity checks as claims of the paper",
    ),
    Mutant(
        "verdict-counts-a-stale-record",
        "ntk_core/bookkit/verdicts.py",
        '    current = [c for c in medium if c.status != "stale"]',
        "    current = medium",
        "a stale record's claims decide the verdict",
    ),
    Mutant(
        "trend-holds-without-spread",
        CLAIMS,
        '    if st["mean"] > t * st["sem"]:',
        '    if st["mean"] > 0:',
        "a trend (Figure 5's distance, RDI's kernel drift, Table 2) holds whatever the seeds' spread",
    ),
    Mutant(
        "t-at-infinite-dof",
        CLAIMS,
        "        dof = math.inf if test_se > 0 else seeds - 1",
        "        dof = math.inf",
        "seeds in exact agreement judged with the normal quantile, as if there were infinitely many",
    ),
    Mutant(
        "barely-move-threshold-doubled",
        CLAIMS,
        "BARELY_MOVE = 0.1\n",
        "BARELY_MOVE = 0.2\n",
        "Figures 3, 6–8: 'weights barely move' within 20 % of their norm",
    ),
    Mutant(
        "ledger-stale-record-counts",
        LEDGER,
        "        if self._stale is not None:  # on a stale record",
        "        if False:  # on a stale record",
        "a stale record's verdicts count as current ones",
    ),
    Mutant(
        "ledger-finding-without-evidence",
        LEDGER,
        """        if not bool(evidence):
            raise AssertionError(f"{ref}: the finding""",
        """        if False:
            raise AssertionError(f"{ref}: the finding""",
        "a finding recorded without the evidence that the claim fails",
    ),
)
