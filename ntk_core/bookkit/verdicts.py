"""One verdict per exhibit and statement of the paper, from the claims the chapters checked.

A chapter records many claims per reference of the paper (:class:`~ntk_core.bookkit.ledger.Claim`): the paper's
own claims, the book's own checks (premises, sanity: ``kind="check"``), at the live build's scale and on the
recorded ``medium`` run. A reader asks of each exhibit one question — does it hold, at what scale, how sure? —
and this module answers it by one rule (:func:`verdict`), in the six words of :data:`~ntk_core.bookkit.ledger.VERDICTS`:

* the exhibit is judged at the **largest scale that tested it**: the recorded medium run where it has claims
  on a current record, else the live build; an exact check (``verified``, ``vacuous``: closed forms, float64,
  Monte Carlo) does not depend on the scale and counts at either;
* only the **paper's claims** count; the book's own checks are premises and sanity checks, shown apart;
* each claim's status says what it is (:data:`~ntk_core.bookkit.ledger.STATUS_VERDICT`); a claim that failed its premise or lies
  within the sampling error of its test (:mod:`ntk_core.bookkit.sampling`) "cannot be tested at this scale";
* the exhibit is **verified** when every counted claim is an exact check that holds; it **holds** when every
  counted claim holds, and is **vacuous** instead when one of them is a bound that holds but says nothing; it
  **holds in part** when some hold and others fail or cannot be tested; it **does not hold** when none holds
  and one fails beyond its sampling error; it **cannot be tested at this scale** when none was settled.

:data:`PAPER` holds the paper's side of each row: its claim in one line, its number and its scale.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from .ledger import STATUS_VERDICT, Claim, Headline, is_exhibit, paper_order

__all__ = ["PAPER", "PaperSide", "Verdict", "verdict", "row_refs", "short_reason"]

_EXACT = ("verified", "vacuous")


@dataclass(frozen=True)
class PaperSide:
    """The paper's side of a row: its claim in one line, its key number, and the scale it ran at."""

    claim: str
    number: str
    scale: str


#: the exhibits and statements of the paper that the glance gives one row each, in the paper's words and numbers
PAPER: dict[str, PaperSide] = {
    "Figure 1a": PaperSide(
        "Setting 1 (MNIST 5 vs 8): GD+RDI and GD+AUX consistently beat vanilla GD, which over-fits, and match GD "
        "with early stopping",
        "curves only (no table)",
        "10,000 hidden units, all of MNIST 5 vs 8",
    ),
    "Figure 1b": PaperSide(
        "Setting 2 (CIFAR airplane vs automobile): SGD+AUX and SGD+RDI end with a lower test error than vanilla "
        "SGD at noise 20 %, λ = 4",
        "curves only (no table)",
        "11-layer CNN, 192 channels, 10,000 images",
    ),
    "Figure 2": PaperSide(
        "Setting 3 (CIFAR-10): normal training over-fits at noise 40 %; with AUX the last epoch is about as good "
        "as the best",
        "curves only (no table)",
        "ResNet-34, all of CIFAR-10, 164 epochs",
    ),
    "Figures 3, 6–8": PaperSide(
        "Setting 2: the weights of layers 4 and 7 barely move from their initialisation",
        "curves only (no table)",
        "11-layer CNN, 192 channels",
    ),
    "Figure 4": PaperSide(
        "difference trick: the test error drops as α grows (the initial output shrinks)",
        "curves only (no table)",
        "two-layer net, 10,000 hidden units, 5,000 GD steps",
    ),
    "Figure 5": PaperSide(
        "Setting 2: a larger λ keeps the network closer to its initialisation and fits less of the noise",
        "curves only (no table)",
        "11-layer CNN, 192 channels, λ from 0.25 to 8",
    ),
    "Table 1": PaperSide(
        "Setting 3: AUX's last epoch beats normal training with early stopping",
        "87.81 vs 86.35 % (CCE), 88.92 vs 85.92 % (MSE) at noise 0.4",
        "ResNet-34, all of CIFAR-10, 5 runs",
    ),
    "Table 2": PaperSide(
        "the distance to initialisation grows with samples and noise, falls with λ, and does not depend on width "
        "or learning rate",
        "↗ samples, ↗ noise, ↘ λ, — width, — learning rate",
        "Setting 1's two-layer net",
    ),
    "Section 6.2": PaperSide(
        "the networks of Settings 1 and 2 are in or close to the NTK regime; Setting 3's ResNet-34 is not",
        "weight movements are small (Figures 3, 6–8)",
        "Settings 1–3 at the paper's sizes",
    ),
    "Theorem 4.1": PaperSide(
        "in the NTK regime GD on RDI and on AUX both learn kernel ridge regression with ridge λ²",
        "η ≤ 1/(‖k(X,X)‖ + λ²)",
        "infinite width",
    ),
    "Theorem 5.1": PaperSide(
        "additive sub-Gaussian noise: the clean ℓ2 loss of the KRR predictor is bounded, eq. (10)",
        "O(√(yᵀK⁻¹y/n) + σ√(tr K)/(λn)…)",
        "any n",
    ),
    "Theorem 5.2": PaperSide(
        "binary flips at rate p: the clean 0-1 error of the KRR predictor is bounded",
        "a bound with O(·) terms (Appendix C.2)",
        "any n",
    ),
    "Theorem 5.3": PaperSide(
        "K classes with transition matrix P: the clean error is bounded, scaling like 1/gap(P)",
        "∝ 1/gap(P)",
        "any n",
    ),
    "Lemma A.1": PaperSide("the difference trick outputs 0 at initialisation and keeps the NTK", "exact", "any width"),
    "Lemma C.1": PaperSide(
        "the training error of the KRR predictor against the clean labels, with probability ≥ 1 − δ",
        "≥ 1 − δ",
        "any n",
    ),
    "Lemma C.2": PaperSide(
        "the RKHS norm of the KRR predictor and its uniform convergence, with probability ≥ 1 − δ",
        "≥ 1 − δ",
        "any n",
    ),
    "Remark 5.1": PaperSide(
        "clean labels without regularisation: the loss is O(√(yᵀK⁻¹y/n))", "O(√(yᵀK⁻¹y/n))", "any n"
    ),
    "Remark 5.2": PaperSide("labels from a class of smooth functions have yᵀK⁻¹y = O(1)", "O(1)", "any n"),
}


@dataclass(frozen=True)
class Verdict:
    """The verdict of one reference of the paper.

    Attributes
    ----------
    word : str
        One of :data:`~ntk_core.bookkit.ledger.VERDICTS`.
    scale : str
        ``"medium"`` (judged on the recorded medium run), ``"quick"`` (the live build) or ``"exact"`` (every
        counted claim is an exact check, which has no scale).
    held : int
        How many of the counted claims hold (``verified``, ``vacuous`` or reproduced).
    counted : list[Claim]
        The paper's claims the verdict rests on.
    why : str
        For a verdict short of "holds": which claims fall short and why (their values), else "".
    others : str
        The verdict at the other scale, when the live build and the record both tested it ("" otherwise).
    reasons : tuple[str, ...]
        Why it is short of "holds", in a few words each, once per reason (:func:`short_reason`).
    """

    word: str
    scale: str
    held: int
    counted: tuple[Claim, ...]
    why: str
    others: str = ""
    reasons: tuple[str, ...] = ()


def short_reason(claim: Claim) -> str:
    """Why a claim falls short of "holds", in a few words: the premise that fails, "within the sampling error",
    "fails: <statement>", "not run" or "stale record".

    Examples
    --------
    >>> short_reason(Claim("Table 2", "x", "premise not met", "17 % (premise not met: a large width)"))
    'premise not met: a large width'
    >>> short_reason(Claim("Figure 4", "x", "inconclusive", "+0.4 ± 0.5 points"))
    'within the sampling error'
    """
    if claim.status == "premise not met":
        marker = "(premise not met: "
        at = claim.value.rfind(marker)
        premise = claim.value[at + len(marker) : -1] if at >= 0 else "a premise"
        return f"premise not met: {premise}"
    if claim.status == "inconclusive":
        return "within the sampling error" if "seed(s)" not in claim.value else "too few seeds to measure the spread"
    if claim.status == "not reproduced":
        return f"fails: {claim.statement}"
    return STATUS_VERDICT.get(claim.status, claim.status)


def _words(claims: Iterable[Claim]) -> list[str]:
    return [STATUS_VERDICT.get(c.status, c.status) for c in claims]


def _combine(claims: list[Claim]) -> tuple[str, int, str]:
    """The verdict word of a set of the paper's claims, how many hold, and why it is short of "holds"."""
    words = _words(claims)
    settled = [w for w in words if w != "not run"]
    held = sum(w in ("holds", "verified", "vacuous") for w in words)
    short = [c for c, w in zip(claims, words) if w not in ("holds", "verified", "vacuous", "not run")]
    why = "; ".join(f"{c.statement}: {STATUS_VERDICT.get(c.status, c.status)} ({c.value})" for c in short)
    if not settled:
        return "not run", 0, "; ".join(c.value for c in claims)
    if all(w == "verified" for w in settled):
        return "verified", held, ""
    if held == len(settled):
        vacuous = [c.statement for c, w in zip(claims, words) if w == "vacuous"]
        if vacuous:  # true, but where it meets real data it says nothing
            return "vacuous", held, "it holds, but says nothing (above 1) " + "; ".join(vacuous)
        return "holds", held, ""
    if held:
        return "holds in part", held, why
    if "does not hold" in settled:
        return "does not hold", held, why
    return "cannot be tested at this scale", held, why


def verdict(claims: Iterable[Claim]) -> Verdict:
    """The one verdict of a reference of the paper from every claim recorded for it (any chapter, any scale).

    The book's own checks (``kind == "check"``) do not count. The paper's claims on a current medium record are
    judged together with the exact checks (which have no scale); without them, the live build's claims are.
    A record whose configuration changed since (``stale``) counts for nothing: the live build is judged instead, and
    :attr:`Verdict.others` says the record is stale.

    Examples
    --------
    >>> from ntk_core.bookkit.ledger import Claim
    >>> quick = Claim("Figure 1a", "RDI beats GD", "quick", "7 % vs 14 %")
    >>> medium = Claim("Figure 1a", "RDI beats GD", "inconclusive", "0.1 ± 0.2 points", scale="medium")
    >>> v = verdict([quick, medium])
    >>> v.word, v.scale, v.others
    ('cannot be tested at this scale', 'medium', 'quick: holds')
    """
    paper = [c for c in claims if c.kind != "check"]
    exact = [c for c in paper if c.status in _EXACT]
    medium = [c for c in paper if c.scale == "medium" and c.status not in _EXACT]
    live = [c for c in paper if c.scale != "medium" and c.status not in _EXACT]
    stale = [c for c in medium if c.status == "stale"]
    current = [c for c in medium if c.status != "stale"]
    if current and any(c.status != "not run" for c in current):
        chosen = current + exact
        word, held, why = _combine(chosen)
        other = f"quick: {_combine(live + exact)[0]}" if live else ""
        return Verdict(word, "medium", held, tuple(chosen), why, other, _reasons(chosen))
    chosen = live + exact
    word, held, why = _combine(chosen)
    scale = "quick" if live else "exact"
    if stale:
        other = "medium: the record is stale (its configuration changed), so it counts for nothing"
    elif medium:
        other = "medium: " + (medium[0].value if len(medium) == 1 else "not run")
    else:
        other = ""
    return Verdict(word, scale, held, tuple(chosen), why, other, _reasons(chosen))


def _reasons(claims: list[Claim]) -> tuple[str, ...]:
    short = [c for c in claims if c.status not in ("verified", "vacuous", "quick", "medium")]
    return tuple(dict.fromkeys(short_reason(c) for c in short))


def row_refs(claims: Iterable[Claim], headlines: Iterable[Headline] = ()) -> list[str]:
    """The references that get one row each: every reference of :data:`PAPER` that a chapter checked or gave a
    headline, exhibits first in the paper's order, then the statements in the order of :data:`PAPER`."""
    seen = {c.ref for c in claims} | {h.ref for h in headlines}
    refs = [r for r in PAPER if r in seen]
    exhibits = sorted((r for r in refs if is_exhibit(r) or r.startswith("Section")), key=paper_order)
    return exhibits + [r for r in refs if r not in exhibits]
