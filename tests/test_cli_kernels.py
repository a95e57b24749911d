"""The library's commands: ``gram`` on a user's own model and inputs (checked against an explicit Jacobian), and
``bound`` from a saved kernel and labels (checked against the in-memory bound functions)."""

from __future__ import annotations

import json
import sys
import textwrap

import numpy as np
import pytest
import torch

from ntk_core import bounds
from ntk_core.__main__ import main
from ntk_core.infinite import relu_ntk
from ntk_core.noise import symmetric_transition
from ntk_oracle import autograd_ntk

MODELS = textwrap.dedent(
    """
    import torch

    def make():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))

    def not_a_model():
        return 42

    instance = torch.nn.Linear(5, 1)
    """
)


@pytest.fixture
def user_models(tmp_path, monkeypatch):
    (tmp_path / "my_models.py").write_text(MODELS)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("my_models", None)
    yield tmp_path
    sys.modules.pop("my_models", None)


def test_gram_of_a_users_model_without_a_checkpoint_folder(user_models, capsys):
    x = torch.randn(9, 5, generator=torch.Generator().manual_seed(1))
    np.save(user_models / "x.npy", x.numpy())
    out = user_models / "k.npy"
    args = ["gram", "--model", "my_models:make", "--inputs", str(user_models / "x.npy"), "--dtype", "float64"]
    assert main([*args, "--out", str(out)]) == 0
    assert "my_models:make" in capsys.readouterr().out
    import my_models

    np.testing.assert_allclose(
        np.load(out), autograd_ntk(my_models.make(), x, x, "trace").numpy(), rtol=1e-10, atol=1e-12
    )
    assert sorted(p.name for p in user_models.iterdir() if not p.name.startswith("__")) == [
        "k.npy",
        "my_models.py",
        "x.npy",
    ]
    # inputs from a .pt file, the first n of them; a module instance instead of a factory
    torch.save(x, user_models / "x.pt")
    out2 = user_models / "k2.npy"
    args = ["gram", "--model", "my_models:instance", "--inputs", str(user_models / "x.pt"), "--n-images", "4"]
    assert main([*args, "--dtype", "float64", "--out", str(out2)]) == 0
    np.testing.assert_allclose(
        np.load(out2), autograd_ntk(my_models.instance, x[:4], x[:4], "trace").numpy(), rtol=1e-10, atol=1e-12
    )


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--model", "my_models:missing", "--inputs", "X"], "has no attribute 'missing'"),
        (["--model", "no_such_module_here:make", "--inputs", "X"], "cannot import no_such_module_here"),
        (["--model", "my_models:not_a_model", "--inputs", "X"], "returned a int, not a torch.nn.Module"),
        (["--model", "my_models:make"], "needs --inputs"),
        (["--model", "my_models:make", "--inputs", "X", "--data", "cifar2"], "--data apply to the package's models"),
        (["--model", "my_models:make", "--inputs", "X", "--n-images", "99"], "between 1 and 9"),
        (["--model", "resnet", "--inputs", "X"], "two-layer, cnn or package.module:factory"),
    ],
)
def test_gram_on_a_users_model_names_bad_input(user_models, capsys, extra, message):
    np.save(user_models / "x.npy", np.zeros((9, 5), dtype=np.float32))
    extra = [str(user_models / "x.npy") if a == "X" else a for a in extra]
    assert main(["gram", *extra, "--out", str(user_models / "k.npy")]) == 2
    assert message in capsys.readouterr().err
    assert not (user_models / "k.npy").exists()


def test_gram_without_a_checkpoint_folder_needs_out(user_models, capsys):
    np.save(user_models / "x.npy", np.zeros((3, 5), dtype=np.float32))
    assert main(["gram", "--model", "my_models:make", "--inputs", str(user_models / "x.npy")]) == 2
    assert "--out is needed without --checkpoint-dir" in capsys.readouterr().err


def _saved_problem(folder, n=50, d=6):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, d))
    x *= np.sqrt(d) / np.linalg.norm(x, axis=1, keepdims=True)
    K = relu_ntk(x)
    y = np.sign(x[:, 0])
    np.save(folder / "K.npy", K)
    np.save(folder / "y.npy", y)
    np.save(folder / "c.npy", (np.arange(n) % 3).astype(np.int64))
    return K, y


def test_bound_prints_every_term_of_theorem_5_2_from_a_kernel_on_disk(tmp_path, capsys):
    K, y = _saved_problem(tmp_path)
    args = ["bound", "--theorem", "5.2", "--kernel", str(tmp_path / "K.npy"), "--labels", str(tmp_path / "y.npy")]
    assert main([*args, "--lam", "1.5", "--p", "0.1", "--printed", "1", "--json", str(tmp_path / "b.json")]) == 0
    printed = capsys.readouterr().out
    expected = bounds.theorem_5_2_bound(K, y, 1.5, 0.1, 0.05)  # in memory: an independent route
    found = json.loads((tmp_path / "b.json").read_text())
    assert found["total"] == pytest.approx(expected.total, rel=1e-8)
    # the total and its verdict lead, in the output and the JSON
    assert printed.startswith(f"Theorem 5.2: Pr[sgn f*(x) ≠ y] ≤ {expected.total:.4g}: {expected.verdict}")
    assert found["verdict"] == expected.verdict and found["vacuous"] == expected.vacuous
    assert found["lower_limit"] == pytest.approx(expected.lower_limit, rel=1e-8)
    for name in ("train_bias", "train_noise", "rademacher_signal", "concentration", "net_size"):
        assert found[f"additive.{name}"] == pytest.approx(getattr(expected.additive, name), rel=1e-8)
        assert f"additive.{name}" in printed
    assert found["printed.total"] == pytest.approx(bounds.theorem_5_2_printed(K, y, 1.5, 0.1, 0.05).total, rel=1e-8)
    # without --lam, the λ of the bound's leading terms
    assert (
        main(
            [
                "bound",
                "--theorem",
                "5.2",
                "--kernel",
                str(tmp_path / "K.npy"),
                "--labels",
                str(tmp_path / "y.npy"),
                "--p",
                "0.1",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    sigma = bounds.binary_noise_subgaussian_sigma(0.1) / 0.8
    lam = bounds.leading_lambda(bounds.complexity(K, y), len(y), float(np.trace(K)), sigma)
    assert f"{lam:.6g}" in out and "leading_lambda" in out


def test_bound_of_theorem_5_3_takes_the_noise_by_name_or_as_a_matrix(tmp_path, capsys):
    K, _ = _saved_problem(tmp_path)
    classes = np.arange(len(K)) % 3
    P = symmetric_transition(3, 0.2)
    np.save(tmp_path / "P.npy", P)
    base = ["bound", "--theorem", "5.3", "--kernel", str(tmp_path / "K.npy"), "--labels", str(tmp_path / "c.npy")]
    assert main([*base, "--lam", "1", "--noise", "symmetric:0.2", "--json", str(tmp_path / "a.json")]) == 0
    assert main([*base, "--lam", "1", "--noise", str(tmp_path / "P.npy"), "--json", str(tmp_path / "b.json")]) == 0
    a, b = (json.loads((tmp_path / f).read_text()) for f in ("a.json", "b.json"))
    assert a == b
    assert a["total"] == pytest.approx(bounds.theorem_5_3_bound(K, classes, P, 1.0, 0.05).total, rel=1e-8)
    assert "per_output[2].train_bias" in a


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--theorem", "5.2", "--lam", "1"], "Theorem 5.2 needs --p"),
        (["--theorem", "5.1", "--lam", "1"], "Theorem 5.1 needs --sigma"),
        (["--theorem", "5.3", "--lam", "1", "--noise", "symmetric:x"], "the rate must be a number"),
        (["--theorem", "5.2", "--lam", "1", "--p", "0.7"], "p"),
        (["--theorem", "5.2", "--lam", "1", "--p", "0.1", "--kernel", "MISSING.npy"], "no file"),
    ],
)
def test_bound_names_bad_input(tmp_path, capsys, extra, message):
    _saved_problem(tmp_path)
    args = ["bound", "--kernel", str(tmp_path / "K.npy"), "--labels", str(tmp_path / "y.npy"), *extra]
    args = [str(tmp_path / a) if a == "MISSING.npy" else a for a in args]
    assert main(args) == 2
    assert message in capsys.readouterr().err


def test_a_pickled_npy_is_refused(tmp_path, capsys, user_models):
    _saved_problem(tmp_path)
    np.save(tmp_path / "evil.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    args = ["bound", "--theorem", "5.2", "--kernel", str(tmp_path / "K.npy"), "--labels", str(tmp_path / "evil.npy")]
    assert main([*args, "--lam", "1", "--p", "0.1"]) == 2
    assert "cannot read" in capsys.readouterr().err

    # a .pt that holds more than tensors (a pickle that would run code): never unpickled, never advised to be
    class Evil:
        def __reduce__(self):
            return (print, ("unpickled!",))

    torch.save({"x": Evil()}, tmp_path / "evil.pt")
    gram = [
        "gram",
        "--model",
        "my_models:make",
        "--inputs",
        str(tmp_path / "evil.pt"),
        "--out",
        str(tmp_path / "k.npy"),
    ]
    assert main(gram) == 2
    captured = capsys.readouterr()
    assert "is not a tensor file" in captured.err and "weights_only=False" not in captured.err
    assert "unpickled!" not in captured.out and not (tmp_path / "k.npy").exists()


def test_bound_of_an_infinite_kernel_factored_tile_by_tile_without_storing_K(tmp_path, capsys):
    """--infinite setting1 --inputs X: K's tiles computed from X as the tiled Cholesky needs them (never
    stored), every term equal to the dense route's; a second run finds the factors; --factored on a saved K too."""
    from ntk_core.infinite import setting1_kernel

    rng = np.random.default_rng(1)
    x = rng.standard_normal((90, 6))
    x *= np.sqrt(6) / np.linalg.norm(x, axis=1, keepdims=True)
    y = np.sign(x[:, 0] + 0.1)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    np.save(tmp_path / "K.npy", setting1_kernel(x))
    base = ["bound", "--theorem", "5.2", "--labels", str(tmp_path / "y.npy"), "--p", "0.1", "--lam", "0.7"]
    fn = [*base, "--infinite", "setting1", "--inputs", str(tmp_path / "x.npy"), "--factored", str(tmp_path / "f")]
    assert main([*fn, "--json", str(tmp_path / "a.json")]) == 0
    expected = bounds.theorem_5_2_bound(setting1_kernel(x), y, 0.7, 0.1, 0.05)
    a = json.loads((tmp_path / "a.json").read_text())
    assert a["total"] == pytest.approx(expected.total, rel=1e-9)
    assert a["additive.rademacher_signal"] == pytest.approx(expected.additive.rademacher_signal, rel=1e-9)
    tiles = sorted((tmp_path / "f").rglob("*.npz"))
    stamps = [t.stat().st_mtime_ns for t in tiles]
    assert len(tiles) == 2 and main([*fn, "--json", str(tmp_path / "b.json")]) == 0  # λ = 0 and λ = 0.7
    assert [t.stat().st_mtime_ns for t in tiles] == stamps  # found, not recomputed
    assert json.loads((tmp_path / "b.json").read_text()) == a
    saved = [
        *base,
        "--kernel",
        str(tmp_path / "K.npy"),
        "--factored",
        str(tmp_path / "g"),
        "--json",
        str(tmp_path / "c.json"),
    ]
    assert main(saved) == 0
    assert json.loads((tmp_path / "c.json").read_text())["total"] == pytest.approx(expected.total, rel=1e-9)
    capsys.readouterr()
    assert main([*base, "--infinite", "setting1", "--inputs", str(tmp_path / "x.npy")]) == 2
    assert "needs --inputs (the inputs X) and --factored DIR" in capsys.readouterr().err
    assert main([*base, "--kernel", str(tmp_path / "K.npy"), "--inputs", str(tmp_path / "x.npy")]) == 2
    assert "--inputs goes with --infinite" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # argparse: --kernel and --infinite exclude each other
        main([*base, "--kernel", str(tmp_path / "K.npy"), "--infinite", "setting1"])


def test_gram_with_a_tile_folder_makes_no_temporary_folder(user_models, tmp_path, monkeypatch):
    """With --checkpoint-dir (as every rank under torchrun has) no ``ntk-gram-*`` folder is made in the system's
    temporary folder; without it, the one it makes is removed."""
    import tempfile

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    np.save(user_models / "x.npy", np.random.default_rng(0).normal(size=(6, 5)).astype(np.float32))
    made = []
    real = tempfile.TemporaryDirectory
    monkeypatch.setattr(tempfile, "TemporaryDirectory", lambda *a, **k: made.append(k) or real(*a, **k))
    args = ["gram", "--model", "my_models:make", "--inputs", str(user_models / "x.npy")]
    assert main([*args, "--checkpoint-dir", str(tmp_path / "tiles")]) == 0
    assert made == []  # a rank killed mid-run leaves no empty folder behind: none was made
    assert main([*args, "--out", str(tmp_path / "k.npy")]) == 0
    assert len(made) == 1 and list(scratch.iterdir()) == []


TWO_INPUTS = textwrap.dedent(
    """
    import torch

    class Tabular(torch.nn.Module):
        # an image and metadata, two heads: forward(image, meta) or forward(image=..., meta=...)
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.img, self.meta = torch.nn.Linear(6, 8), torch.nn.Linear(2, 8)
            self.score, self.logits = torch.nn.Linear(8, 1), torch.nn.Linear(8, 3)

        def forward(self, image, meta):
            h = torch.tanh(self.img(image) + self.meta(meta))
            return {"score": self.score(h).squeeze(-1), "logits": self.logits(h)}

    def make():
        return Tabular()
    """
)


def test_gram_takes_a_tuple_or_dict_of_inputs_and_selects_an_output(tmp_path, monkeypatch, capsys):
    """``gram --inputs`` takes a .pt holding a tuple (positional arguments) or a dict (keyword arguments) of
    tensors, as ``empirical_ntk`` does, and ``--select-output`` picks one output of a model returning a dict: the
    Gram is the one of the explicit Jacobians of that output, whichever way the inputs are given; bad parts are
    named."""
    (tmp_path / "tabular.py").write_text(TWO_INPUTS)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("tabular", None)
    import tabular

    g = torch.Generator().manual_seed(0)
    image, meta = torch.randn(7, 6, generator=g), torch.randn(7, 2, generator=g)
    torch.save((image, meta), tmp_path / "tuple.pt")
    torch.save({"image": image, "meta": meta}, tmp_path / "dict.pt")
    expected = autograd_ntk(nc_select(tabular.make(), "logits"), (image, meta), (image, meta), "trace").numpy()
    base = ["gram", "--model", "tabular:make", "--dtype", "float64", "--select-output", "logits"]
    for name in ("tuple", "dict"):
        out = tmp_path / f"{name}.npy"
        assert main([*base, "--inputs", str(tmp_path / f"{name}.pt"), "--out", str(out)]) == 0
        np.testing.assert_allclose(np.load(out), expected, rtol=1e-10, atol=1e-12)
    assert (
        main([*base, "--inputs", str(tmp_path / "tuple.pt"), "--n-images", "3", "--out", str(tmp_path / "3.npy")]) == 0
    )
    np.testing.assert_allclose(np.load(tmp_path / "3.npy"), expected[:3, :3], rtol=1e-10, atol=1e-12)
    torch.save((image, meta[:5]), tmp_path / "uneven.pt")
    assert main([*base, "--inputs", str(tmp_path / "uneven.pt"), "--out", str(tmp_path / "u.npy")]) == 2
    assert "different numbers of examples" in capsys.readouterr().err
    bad = ["gram", "--model", "tabular:make", "--inputs", str(tmp_path / "dict.pt"), "--out", str(tmp_path / "b.npy")]
    assert main([*bad, "--select-output", "probs"]) == 2
    assert "no 'probs'" in capsys.readouterr().err
    sys.modules.pop("tabular", None)


def nc_select(model, key):
    from ntk_core import select_output

    return select_output(model, key)
