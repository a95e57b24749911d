"""The library's commands: ``gram`` (the empirical NTK Gram matrix of a model, the package's or the user's) and
``bound`` (every term of Theorem 5.1, 5.2 or 5.3 from a saved kernel and labels). :mod:`ntk_core.__main__`
registers them beside the harness's commands."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import json
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from .._checks import check_output_path, json_written_with

__all__ = ["add_gram", "gram", "add_bound", "bound", "add_label_errors", "label_errors"]


# --------------------------------------------------------------------------- files


def load_array(path: Path, what: str) -> Any:
    """A ``.npy`` (never a pickle), ``.pt`` (tensors only: ``weights_only``) or text (``.txt``/``.csv``) array."""
    if not path.is_file():
        raise ValueError(f"{what}: no file {path}")
    suffix = path.suffix.lower()
    try:
        if suffix == ".npy":
            return np.load(path, allow_pickle=False)
        if suffix == ".pt":
            import pickle

            import torch

            try:
                return torch.load(path, weights_only=True, map_location="cpu")
            except pickle.UnpicklingError:  # its text advises weights_only=False: never for a file we were given
                raise ValueError(
                    f"{what}: {path} is not a tensor file: it holds Python objects besides tensors, which ntk_core "
                    "does not unpickle (save the tensor alone: torch.save(x, path), or np.save to a .npy)"
                ) from None
        if suffix in (".txt", ".csv"):
            return np.loadtxt(path, delimiter="," if suffix == ".csv" else None)
    except (OSError, ValueError, EOFError, RuntimeError) as err:
        raise ValueError(f"{what}: cannot read {path} ({type(err).__name__}: {err})") from None
    raise ValueError(f"{what}: {path} is not a .npy, .pt, .txt or .csv file")


def user_model(spec: str) -> Any:
    """The model made by ``package.module:factory`` (a callable taking no argument, or a module instance)."""
    import torch

    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"--model must be two-layer, cnn or package.module:factory, got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(f"--model {spec}: cannot import {module_name} ({err}); is it on PYTHONPATH?") from None
    try:
        factory = getattr(module, attr)
    except AttributeError:
        raise ValueError(f"--model {spec}: {module_name} has no attribute {attr!r}") from None
    model = factory if isinstance(factory, torch.nn.Module) else factory()
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"--model {spec}: {attr}() returned a {type(model).__name__}, not a torch.nn.Module")
    return model.eval()


# --------------------------------------------------------------------------- gram


def add_gram(sub: Any) -> None:
    """Register ``gram``."""
    from ..ntk.distributed import BACKENDS
    from ..ntk import METHODS

    gram = sub.add_parser(
        "gram",
        help="the empirical NTK Gram matrix of a model (the package's or yours) (torchrun: N processes)",
        description="The empirical NTK Gram matrix k(x_i, x_j) of a model of the package on the first n images of a "
        "data set, or of your own model (--model package.module:factory) on your inputs (--inputs x.npy|x.pt), "
        "tile by tile, assembled into a .npy file. Run it under "
        "`torchrun --nproc_per_node=N [--nnodes ...] -m ntk_core gram ...` to spread the tiles over N "
        "processes (gloo on CPUs, nccl with one GPU per rank); with --checkpoint-dir, rerun the same command "
        "(any N) to resume.",
    )
    gram.add_argument(
        "--model",
        default="two-layer",
        help="two-layer: Setting 1's network (TwoLayerNet on flattened inputs); cnn: Setting 2's CNN "
        "(ConvNet, first and last layer frozen, in the difference trick); or package.module:factory, a function "
        "of no argument returning your torch.nn.Module (put in eval mode), with --inputs",
    )
    gram.add_argument(
        "--inputs",
        type=Path,
        default=None,
        help="your model's inputs, examples along dimension 0: a .npy, or a .pt holding a tensor, a tuple (the "
        "model's positional arguments) or a dict (its keyword arguments) of tensors",
    )
    gram.add_argument(
        "--select-output",
        default=None,
        metavar="NAME|INDEX",
        help="for your model returning a tuple or dict: the output whose NTK to compute (an index or a name)",
    )
    gram.add_argument(
        "--width", type=int, default=None, help="hidden width (two-layer, default 1000) or channels (cnn, default 16)"
    )
    gram.add_argument("--depth", type=int, default=8, help="layers of the cnn (default 8)")
    gram.add_argument("--seed", type=int, default=0, help="initialisation seed (default 0)")
    gram.add_argument(
        "--data",
        choices=("mnist5v8", "cifar2", "cifar10"),
        default=None,
        help="MNIST 5 vs 8 (default for two-layer), CIFAR airplane vs automobile (default for cnn), or all of CIFAR-10",
    )
    gram.add_argument("--split", choices=("train", "test"), default="train")
    gram.add_argument(
        "--n-images",
        dest="n",
        type=int,
        default=None,
        help="the first n images or inputs (default: all); not --n, which torchrun would take for its own --nnodes",
    )
    gram.add_argument(
        "--pool", type=int, default=None, help="average-pool the images pool x pool first (default 1: full resolution)"
    )
    gram.add_argument("--method", choices=("auto", *METHODS), default="auto")
    gram.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    gram.add_argument("--tile-size", type=int, default=None)
    gram.add_argument(
        "--memory-gib",
        type=float,
        default=None,
        help="working memory per rank for a tile, in GiB (default 2; on a GPU, most of its memory)",
    )
    gram.add_argument(
        "--checkpoint-dir",
        type=Path,
        default=None,
        help="folder for the tiles, shared by all ranks, that makes a run resumable (needed with several "
        "processes; without it a single process keeps its tiles in a temporary folder)",
    )
    gram.add_argument(
        "--out",
        type=Path,
        default=None,
        help="the .npy to write (default: gram.npy in the tile folder; needed without one)",
    )
    gram.add_argument("--overwrite", action="store_true", help="replace --out if it exists (never one of the inputs)")
    gram.add_argument("--backend", choices=BACKENDS, default=None, help="default: nccl with CUDA, else gloo")
    gram.add_argument("--device", default=None, help="default: this rank's GPU with nccl, else cpu")
    gram.add_argument("--progress", action="store_true", help="a progress bar per rank")


def _n_first(n: int | None, available: int, what: str) -> int:
    if n is not None and not 1 <= n <= available:
        raise ValueError(f"--n-images must be between 1 and {available} (the {what}), got {n}")
    return available if n is None else n


def gram_inputs(args: argparse.Namespace) -> tuple[Any, Any, str]:
    """The model, its inputs and a one-line description, from the ``gram`` arguments."""

    if ":" in args.model:
        given = [
            flag for flag, value in (("--data", args.data), ("--width", args.width), ("--pool", args.pool)) if value
        ]
        if given:
            raise ValueError(f"{', '.join(given)} apply to the package's models; your model takes --inputs")
        if args.inputs is None:
            raise ValueError("--model package.module:factory needs --inputs (a .npy or .pt file of its inputs)")
        model = user_model(args.model)
        if args.select_output is not None:
            from ..ntk import select_output

            key = args.select_output
            model = select_output(model, int(key) if key.lstrip("-").isdigit() else key)
        parts, rows = _model_inputs(load_array(args.inputs, "--inputs"), args.inputs)
        n = _n_first(args.n, rows, f"rows of {args.inputs}")
        x = {k: v[:n] for k, v in parts.items()}
        inputs = x[None] if None in x else tuple(x.values()) if all(isinstance(k, int) for k in x) else x
        return model, inputs, f"{args.model} on {args.inputs}, n = {n}"
    if args.select_output is not None:
        raise ValueError("--select-output is for your own model (--model package.module:factory)")
    if args.model not in ("two-layer", "cnn"):
        raise ValueError(f"--model must be two-layer, cnn or package.module:factory, got {args.model!r}")
    if args.inputs is not None:
        raise ValueError("--inputs is for your own model (--model package.module:factory)")
    return _package_inputs(args)


def _model_inputs(loaded: Any, where: Path) -> tuple[dict[Any, Any], int]:
    """``--inputs`` as the model takes them, by part (``None``: one tensor; 0, 1, …: a tuple's; names: a dict's),
    each a tensor with the examples along dimension 0, and the number of examples."""
    import torch

    if isinstance(loaded, dict):
        parts: dict[Any, Any] = {str(k): v for k, v in loaded.items()}
    elif isinstance(loaded, (tuple, list)):
        parts = dict(enumerate(loaded))
    else:
        parts = {None: loaded}
    if not parts:
        raise ValueError(f"--inputs {where} holds an empty {type(loaded).__name__}: nothing to compute on")
    for key, value in parts.items():
        name = "its tensor" if key is None else f"its part {key!r}"
        try:
            value = torch.as_tensor(value) if not isinstance(value, torch.Tensor) else value
        except (TypeError, ValueError, RuntimeError):
            raise ValueError(f"--inputs {where}: {name} is a {type(value).__name__}, not a tensor") from None
        if value.ndim < 1 or len(value) == 0:
            raise ValueError(
                f"--inputs {where}: {name} must hold examples along dimension 0, got shape {tuple(value.shape)}"
            )
        parts[key] = value
    sizes = {key: len(v) for key, v in parts.items()}
    if len(set(sizes.values())) > 1:
        raise ValueError(f"--inputs {where}: its parts hold different numbers of examples {sizes} (dimension 0)")
    return parts, next(iter(sizes.values()))


def _package_inputs(args: argparse.Namespace) -> tuple[Any, Any, str]:
    import torch

    from .. import data
    from . import setting2
    from ..nets import TwoLayerNet

    name = args.data or ("mnist5v8" if args.model == "two-layer" else "cifar2")
    if args.n is not None and args.n < 1:
        raise ValueError(f"--n-images must be a positive number of images, got {args.n}")
    pool = args.pool or 1
    if args.model == "cnn" and name == "mnist5v8":
        raise ValueError("--model cnn takes CIFAR images (--data cifar2 or cifar10), not MNIST")
    if name == "mnist5v8":
        images = data.mnist_5_vs_8(args.split).x
        x = data.mnist_features(images if args.n is None else images[: args.n], pool)
    else:
        images = (
            data.cifar_airplane_vs_automobile(args.split).x
            if name == "cifar2"
            else data.load_cifar10(args.split).images
        )
        config = dataclasses.replace(setting2.Config.quick(), pool=pool, depth=args.depth, channels=args.width or 16)
        x = setting2.features(config)(images if args.n is None else images[: args.n])
    _n_first(args.n, x.shape[0], f"images of {name} {args.split}")
    if args.model == "two-layer":
        x = x.reshape(x.shape[0], -1)
        model: torch.nn.Module = TwoLayerNet(x.shape[1], args.width or 1000, seed=args.seed)
        what = f"two-layer net, width {args.width or 1000}"
    else:
        model = setting2.network(config, args.seed)
        what = f"Setting 2's CNN, depth {args.depth}, {config.channels} channels"
    return model, torch.from_numpy(x), f"{what}, seed {args.seed}; {name} {args.split}, n = {x.shape[0]}"


def gram(args: argparse.Namespace) -> int:
    """Run ``gram``: 0 done, 2 bad input (said on stderr, no traceback)."""
    import torch
    import torch.distributed as dist

    from ..ntk.distributed import distributed_ntk, init_from_env

    joined = init_from_env(args.backend)
    try:
        try:
            if args.checkpoint_dir is None and joined and dist.get_world_size() > 1:
                raise ValueError("several processes share their tiles through --checkpoint-dir: give one")
            if args.checkpoint_dir is None and args.out is None:
                raise ValueError("--out is needed without --checkpoint-dir (the tiles' folder is temporary)")
            if args.out is not None:
                check_output_path(args.out, "--out", inputs={"--inputs": args.inputs}, overwrite=args.overwrite)
            model, x, what = gram_inputs(args)
            # a temporary tile folder only without --checkpoint-dir (one process): none is left by a rank
            scratch = tempfile.TemporaryDirectory(prefix="ntk-gram-") if args.checkpoint_dir is None else None
            with scratch or contextlib.nullcontext(str(args.checkpoint_dir)) as tiles:
                res = distributed_ntk(
                    model,
                    x,
                    checkpoint_dir=tiles,
                    out=args.out,
                    method=args.method,
                    tile_size=args.tile_size,
                    device=args.device,
                    return_matrix=False,
                    memory_budget=None if args.memory_gib is None else int(args.memory_gib * 2**30),
                    dtype=torch.float64 if args.dtype == "float64" else torch.float32,
                    progress=args.progress,
                )
        except (ValueError, OSError, TypeError) as err:  # bad input, missing data, a full disk: no traceback
            print(f"error: {err}", file=sys.stderr)
            return 2
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
        print(
            f"rank {res.rank}/{res.world_size}: {res.computed} tiles computed, {res.loaded} loaded, "
            f"{res.seconds:.2f} s, peak RSS {peak:.0f} MiB",
            file=sys.stderr,
        )
        if res.rank == 0:
            print(f"{what}; method {res.method}, tile {res.tile_size}, {res.tiles} tiles, {res.world_size} process(es)")
            print(f"gram: {res.path} {res.shape}")
        return 0
    finally:
        if joined:
            dist.destroy_process_group()


# --------------------------------------------------------------------------- bound


def add_bound(sub: Any) -> None:
    """Register ``bound``."""
    bound = sub.add_parser(
        "bound",
        help="every term of Theorem 5.1, 5.2 or 5.3 from a saved kernel and labels",
        description="Every term of the explicit bound of Theorem 5.1 (additive noise), 5.2 (binary, flip rate p) or "
        "5.3 (K classes, transition matrix P), from a kernel matrix K saved as .npy (read from disk in blocks, "
        "never whole: any n the disk holds) or .pt — or an infinite-width kernel of saved inputs, factored tile by "
        "tile without storing K (--infinite, --inputs, --factored) — and the *clean* labels the bound is stated "
        "for (with only noisy labels, yᵀK⁻¹y of the noisy ones is an estimate of the bound's complexity, not the "
        "bound).",
    )
    bound.add_argument("--theorem", choices=("5.1", "5.2", "5.3"), required=True)
    which = bound.add_mutually_exclusive_group(required=True)
    which.add_argument("--kernel", type=Path, help="K, (n, n): .npy (out of core) or .pt")
    which.add_argument(
        "--infinite",
        choices=tuple(INFINITE_KERNELS),
        help="instead of a saved K: this infinite-width kernel of --inputs, its tiles computed as the tiled "
        "Cholesky factorisation needs them (K never stored; needs --factored)",
    )
    bound.add_argument("--inputs", type=Path, default=None, help="with --infinite: the inputs X, (n, d) .npy or .pt")
    bound.add_argument(
        "--factored",
        type=Path,
        default=None,
        metavar="DIR",
        help="solve by a tiled Cholesky factorisation of K + λ²I kept in DIR (ntk_core.kernel_matrix.factored: resumable, "
        "accurate at λ → 0 where conjugate gradients need many passes) instead of K's own route",
    )
    bound.add_argument(
        "--labels", type=Path, required=True, help="clean labels, (n,): targets (5.1), ±1 (5.2) or classes (5.3)"
    )
    bound.add_argument("--lam", type=float, default=None, help="λ > 0 (the ridge is λ²); default: leading_lambda's")
    bound.add_argument("--delta", type=float, default=0.05, help="failure probability δ (default 0.05)")
    bound.add_argument("--sigma", type=float, default=None, help="5.1: σ, the noise's sub-Gaussian parameter")
    bound.add_argument("--p", type=float, default=None, help="5.2: the flip rate p in [0, 1/2)")
    bound.add_argument(
        "--noise",
        default=None,
        help="5.3: symmetric:r or pairflip:r (the transition matrix of that noise at rate r), or a .npy/.pt "
        "file holding P (K × K, column-stochastic: P[c', c] = Pr[noisy c' | clean c])",
    )
    bound.add_argument("--printed", type=float, default=None, metavar="C", help="also the printed O(·) form, O := C·")
    bound.add_argument("--json", type=Path, default=None, help="also write the terms to this file (JSON)")
    bound.add_argument("--overwrite", action="store_true", help="replace --json if it exists (never one of the inputs)")


def _transition(spec: str, labels: np.ndarray) -> np.ndarray:
    from ..noise import pairflip_transition, symmetric_transition

    kind, _, rate = spec.partition(":")
    if kind in ("symmetric", "pairflip") and rate:
        try:
            r = float(rate)
        except ValueError:
            raise ValueError(f"--noise {spec}: the rate must be a number") from None
        classes = int(np.max(labels)) + 1 if labels.size else 0
        make = symmetric_transition if kind == "symmetric" else pairflip_transition
        return make(classes, r)
    return np.asarray(load_array(Path(spec), "--noise"), dtype=float)


def terms(obj: Any, prefix: str = "") -> dict[str, Any]:
    """Every field of a bound (nested bounds flattened as ``additive.train_bias``, ``per_output[2].total``) and
    each level's ``total``."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        name = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(value):
            out.update(terms(value, f"{name}."))
        elif isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
            for i, item in enumerate(value):
                out.update(terms(item, f"{name}[{i}]."))
        elif isinstance(value, np.ndarray):
            out[name] = value.tolist()
        else:
            out[name] = value
    if hasattr(obj, "total"):
        out[f"{prefix}total"] = float(obj.total)
    return out


#: The infinite-width kernels ``bound --infinite`` computes from inputs (``k(x1, x2)``; on a diagonal tile
#: ``x2 is x1``).
INFINITE_KERNELS: dict[str, str] = {
    "setting1": "ntk_core.infinite.setting1_kernel: two-layer ReLU NTK, first layer trained (Setting 1)",
    "relu-ntk": "ntk_core.infinite.relu_ntk: two-layer ReLU NTK, both layers trained",
}


def infinite_source(name: str, inputs: Path) -> Any:
    """The :class:`~ntk_core.kernel_matrix.source.KernelSource` of the infinite-width kernel ``name``
    (:data:`INFINITE_KERNELS`) on the inputs saved in ``inputs`` (K never formed whole)."""
    from .. import infinite
    from ..kernel_matrix import KernelSource

    x = load_array(inputs, "--inputs")
    x = np.asarray(x.numpy() if hasattr(x, "numpy") else x, dtype=np.float64)
    fn = infinite.setting1_kernel if name == "setting1" else infinite.relu_ntk
    return KernelSource.from_function(fn, x, name=name)


def add_kernel(sub: Any) -> None:
    """Register ``kernel``."""
    kernel = sub.add_parser(
        "kernel",
        help="an infinite-width kernel of saved inputs written to a .npy, tile by tile (N processes, resumable)",
        description="K = k(X, X) of an infinite-width kernel on saved inputs X, written into one .npy file tile by "
        "tile (ntk_core.kernel_matrix.file.write_kernel): the lower tiles are evaluated and mirrored, shared among "
        "--processes worker processes; K grows in OUT.part with one marker per "
        "finished tile in OUT.tiles/, so that a killed run resumes, and becomes OUT only when whole. For the "
        "empirical NTK of a network, use `gram`; `bound --kernel OUT` reads the file in blocks.",
    )
    kernel.add_argument("--infinite", choices=tuple(INFINITE_KERNELS), required=True)
    kernel.add_argument("--inputs", type=Path, required=True, help="the inputs X, (n, d): a .npy or .pt file")
    kernel.add_argument("--out", type=Path, required=True, help="the .npy file to write")
    kernel.add_argument("--overwrite", action="store_true", help="replace --out if it exists (never one of the inputs)")
    kernel.add_argument(
        "--processes",
        type=int,
        default=1,
        help="worker processes (default 1); with several, set OMP_NUM_THREADS so that processes x threads fits the cores",
    )
    kernel.add_argument("--tile", type=int, default=None, help="tile side (default: from the memory budget)")
    kernel.add_argument("--progress", action="store_true", help="a progress bar over the tiles")


def kernel(args: argparse.Namespace) -> int:
    """Run ``kernel``: 0 done, 2 bad input (said on stderr, no traceback)."""
    from ..kernel_matrix import write_kernel

    try:
        check_output_path(args.out, "--out", inputs={"--inputs": args.inputs}, overwrite=args.overwrite)
        out = write_kernel(
            infinite_source(args.infinite, args.inputs),
            args.out,
            tile=args.tile,
            processes=args.processes,
            progress=args.progress,
        )
    except (ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(
        f"{out.path}: K of {args.infinite}, {out.n} x {out.n} float64, {out.tiles} tiles of {out.tile} "
        f"({out.computed} computed now)"
    )
    return 0


def _kernel_argument(args: argparse.Namespace) -> Any:
    """K as the bounds take it: a saved matrix (a ``.npy`` read in blocks), or with ``--factored`` a
    :class:`~ntk_core.kernel_matrix.factored.FactoredKernel` of that matrix or of ``--infinite`` on ``--inputs``, its factors
    written to the ``--factored`` folder whatever their size (a second run finds them there)."""
    from ..kernel_matrix import FactoredKernel, KernelSource

    if args.infinite is not None:
        if args.inputs is None or args.factored is None:
            raise ValueError("--infinite needs --inputs (the inputs X) and --factored DIR (where the factors go)")
        return FactoredKernel(infinite_source(args.infinite, args.inputs), args.factored, persist=True)
    if args.inputs is not None:
        raise ValueError("--inputs goes with --infinite; with --kernel, K is given")
    path = args.kernel
    if path.suffix.lower() == ".npy":
        if not path.is_file():
            raise ValueError(f"--kernel: no file {path}")
        K: Any = str(path)  # read in blocks (ntk_core.kernel_matrix.on_disk)
    else:
        K = np.asarray(load_array(path, "--kernel"), dtype=np.float64)
    if args.factored is None:
        return K
    return FactoredKernel(KernelSource.from_matrix(K, "--kernel"), args.factored, persist=True)


def _leading(theorem: str, K: Any, labels: np.ndarray, args: argparse.Namespace, P: np.ndarray | None) -> float:
    from .. import bounds
    from ..kernel_matrix import as_kernel_matrix

    k = as_kernel_matrix(K)
    n, trace = k.n, k.trace()
    if theorem == "5.1":
        return bounds.leading_lambda(bounds.complexity(k, labels), n, trace, args.sigma)
    if theorem == "5.2":
        sigma = bounds.binary_noise_subgaussian_sigma(args.p) / (1 - 2 * args.p)
        return bounds.leading_lambda(bounds.complexity(k, labels), n, trace, sigma)
    assert P is not None
    Q = np.asarray(P, dtype=float)[:, labels.astype(int)]
    return bounds.leading_lambda(bounds.complexity(k, Q.T), n, trace, bounds.multiclass_noise_subgaussian_sigma(P))


def bound(args: argparse.Namespace) -> int:
    """Run ``bound``: print every term; 0 done, 2 bad input (said on stderr, no traceback)."""
    from .. import bounds

    try:
        needs = {"5.1": ("--sigma", args.sigma), "5.2": ("--p", args.p), "5.3": ("--noise", args.noise)}
        flag, value = needs[args.theorem]
        if value is None:
            raise ValueError(f"Theorem {args.theorem} needs {flag}")
        if args.json is not None:
            inputs = {"--labels": args.labels, "--kernel": args.kernel, "--inputs": args.inputs}
            made_here = json_written_with(("theorem", "lam", "lam_from"))
            check_output_path(args.json, "--json", inputs=inputs, overwrite=args.overwrite, made_here=made_here)
        labels = load_array(args.labels, "--labels")
        labels = np.asarray(labels.numpy() if hasattr(labels, "numpy") else labels).reshape(-1)
        K = _kernel_argument(args)
        P = _transition(args.noise, labels) if args.theorem == "5.3" else None
        lam = args.lam if args.lam is not None else _leading(args.theorem, K, labels, args, P)
        if args.theorem == "5.1":
            result: Any = bounds.theorem_5_1_bound(K, labels, lam, args.sigma, args.delta)
            printed = (
                None
                if args.printed is None
                else bounds.theorem_5_1_printed(K, labels, lam, args.sigma, args.delta, args.printed)
            )
        elif args.theorem == "5.2":
            result = bounds.theorem_5_2_bound(K, labels, lam, args.p, args.delta)
            printed = (
                None
                if args.printed is None
                else bounds.theorem_5_2_printed(K, labels, lam, args.p, args.delta, args.printed)
            )
        else:
            assert P is not None
            result = bounds.theorem_5_3_bound(K, labels.astype(int), P, lam, args.delta)
            printed = (
                None
                if args.printed is None
                else bounds.theorem_5_3_printed(K, labels.astype(int), P, lam, args.delta, args.printed)
            )
    except (ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    found = {"theorem": args.theorem, "lam": lam, "lam_from": "--lam" if args.lam is not None else "leading_lambda"}
    found.update(verdict=result.verdict, vacuous=result.vacuous, lower_limit=result.lower_limit)
    found.update(terms(result))
    for line in result.report().splitlines()[:-1]:  # the total and its verdict first; the terms follow
        print(line)
    if printed is not None:
        found.update(terms(printed, "printed."))
    width = max(len(k) for k in found)
    for key, value in found.items():
        shown = f"{value:.6g}" if isinstance(value, float) and math.isfinite(value) else str(value)
        print(f"{key:<{width}}  {shown}")
    if args.json is not None:
        from .._store import atomic_write_bytes

        atomic_write_bytes(args.json, (json.dumps(found, indent=1, default=float) + "\n").encode())
    return 0


# --------------------------------------------------------------------------- label-errors


def add_label_errors(sub: Any) -> None:
    """Register ``label-errors``."""
    found = sub.add_parser(
        "label-errors",
        help="rank the training labels by how likely they are wrong, from a kernel and the labels",
        description="Kernel ridge regression on the given labels (ridge λ², eq. 8) holds each label against the "
        "prediction of the other examples (exact leave-one-out, in memory) or against the fit (--method "
        "residual, also for a K on disk); prints how many labels are likely wrong and the most suspicious ones "
        "(ntk_core.label_errors.from_kernel).",
    )
    found.add_argument("--kernel", type=Path, required=True, help="K = k(X, X), (n, n): .npy or .pt")
    found.add_argument("--labels", type=Path, required=True, help="the given labels, (n,): ±1 or classes 0..K-1")
    found.add_argument("--lam", type=float, required=True, help="λ (the ridge is λ²)")
    found.add_argument("--method", choices=("leave-one-out", "residual"), default="leave-one-out")
    noise = found.add_mutually_exclusive_group()
    noise.add_argument("--flip-rate", type=float, default=None, help="the known flip rate of ±1 labels")
    noise.add_argument(
        "--noise", default=None, help="the known class noise: symmetric:RATE, pairflip:RATE or P.npy (P[noisy, clean])"
    )
    found.add_argument("--top", type=int, default=20, help="how many of the most suspicious to print (default 20)")
    found.add_argument("--json", type=Path, default=None, help="also write the scores and ranking (JSON)")
    found.add_argument("--overwrite", action="store_true", help="replace --json if it exists (never an input)")


def label_errors(args: argparse.Namespace) -> int:
    """Run ``label-errors``: 0 done, 2 bad input (said on stderr, no traceback)."""
    from .. import label_errors as finder

    try:
        if args.top < 0:
            raise ValueError(f"--top must be >= 0, got {args.top}")
        if args.json is not None:
            made_here = json_written_with(("method", "n_wrong", "ranking"))
            inputs = {"--kernel": args.kernel, "--labels": args.labels}
            check_output_path(args.json, "--json", inputs=inputs, overwrite=args.overwrite, made_here=made_here)
        labels = load_array(args.labels, "--labels")
        labels = np.asarray(labels.numpy() if hasattr(labels, "numpy") else labels).reshape(-1)
        if args.kernel.suffix.lower() == ".npy":
            K: Any = str(args.kernel)  # read in blocks: never whole unless the leave-one-out score needs it
            if args.method == "leave-one-out":
                K = np.load(args.kernel, allow_pickle=False)
        else:
            K = np.asarray(load_array(args.kernel, "--kernel"), dtype=np.float64)
        P = _transition(args.noise, labels) if args.noise is not None else None
        found = finder.from_kernel(K, labels, args.lam, method=args.method, flip_rate=args.flip_rate, transition=P)
    except (ValueError, TypeError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(found)
    for rank, i in enumerate(found.top(args.top), 1):
        suggested = "" if found.suggested is None else f"  suggested {found.suggested[i]:g}"
        print(f"{rank:>4}. example {int(i):>7}  label {labels[i]:g}{suggested}  score {found.scores[i]:.4g}")
    if args.json is not None:
        from .._store import atomic_write_bytes

        payload = {
            "method": found.method,
            "lam": args.lam,
            "n_wrong": found.n_wrong,
            "n_wrong_source": found.n_wrong_source,
            "ranking": found.ranking.tolist(),
            "scores": found.scores.tolist(),
            "suggested": None if found.suggested is None else found.suggested.tolist(),
        }
        atomic_write_bytes(args.json, (json.dumps(payload) + "\n").encode())
    return 0
