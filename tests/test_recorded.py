"""Recorded results (results/medium/): the records cannot drift from the code, and the record/replay machinery.

``test_recorded_result_replays`` re-runs units of the records (``python -m ntk_core replay``, each in a process
of its own, which starts in the record's arithmetic: ``ntk_core.experiments._arithmetic``; two at a time, started
with the session by ``tests/support/replay_plan.py``, so that they run beside the other tests), checks each against
its recorded rows, and checks that every record's ``table.csv`` is what its units give. Which units: one of
**every** unit class of every record (``unit_class``: units of one class run the same code with other numbers),
drawn within the class with a seed that is printed and can be fixed with ``NTK_REPLAY_SEED``, so that a record that
does not reproduce fails every run. Units of Settings 2 and 3 (per-epoch rows) are replayed cut to their first
epochs compared bit for bit (``_record.EpochCut``), units of ``bound_scale`` by their rows at the leading λ
(``_record.RowCut``: the λ grid's factorisations left out), the others whole to 1e-6; ``make replay``
(``NTK_REPLAY_WHOLE=1``) replays whole units. Each record's **canary** (``_canary``: its configuration shrunk to
seconds, recorded with it) is computed whole and compared byte for byte: a late epoch, a learning-rate decay, the
rows computed beside the units. That is what makes a record current: no fingerprint of the code is asked for.
``NTK_REPLAY_MAX_S`` replays a sample of the classes within a budget instead. A machine that cannot compute in a
record's arithmetic, or that loads other data, skips with the reason. The other tests record a tiny configuration
into a temporary folder.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys

import pandas as pd
import pytest
from replay_plan import CANARY, REPLAY_MAX_S, REPLAY_WHOLE, replay_seed
from test_experiments_cifar import TINY as CIFAR_TINY

from ntk_core import experiments
from browser import LOCAL_PATH
from ntk_core.__main__ import main
from ntk_core.experiments import _arithmetic, _record, _runner
from ntk_core.experiments._record import (
    ArithmeticDiffers,
    RecordMissing,
    ReplayTooCostly,
    choose_across,
    choose_units,
    cut_of_record,
    record_dir,
    recorded,
    replay,
    unit_class,
)

TINY = dict(n_train=40, n_val=20, n_test=40, width=16, steps=10, eval_every=5, noise_levels=(0.2,), lams=(0.5, 2.0))


@pytest.fixture
def data_env(monkeypatch, shared_data, tmp_path):
    monkeypatch.setenv("NTK_CORE_DATA", str(shared_data))
    monkeypatch.setenv("NTK_CORE_CACHE", str(tmp_path / "cache"))
    return tmp_path


def _record_tiny(root):
    return experiments.record("setting1", "quick", root=root, **TINY)


def _tiny_is_the_quick_profile(monkeypatch):
    """Make the tiny config what setting1's quick profile resolves to (so a tiny record is current, not stale)."""
    tiny = experiments.make_config("setting1", "quick", **TINY)
    make_config = experiments.make_config
    monkeypatch.setattr(
        experiments,
        "make_config",
        lambda n, p, **o: tiny if (n, p) == ("setting1", "quick") else make_config(n, p, **o),
    )


@pytest.mark.parametrize("name", experiments.EXPERIMENTS)
def test_recorded_result_replays(name, replays):
    plan = replays[name]
    if isinstance(plan, str):
        pytest.skip(plan)
    units = json.loads((record_dir(name, "medium") / "units.json").read_text())
    classes = {unit_class(u["key"]) for u in units}
    replayed = {unit_class(key) for key, _ in plan if isinstance(key, dict)}
    cut = None if REPLAY_WHOLE else cut_of_record(name, "medium")
    print(
        f"replaying {name} with NTK_REPLAY_SEED={replay_seed()}, NTK_REPLAY_MAX_S={REPLAY_MAX_S:g}: {len(replayed)} of "
        f"{len(classes)} unit classes ({'; '.join(sorted(replayed)) or 'none: its table only'}), "
        + ("whole" if cut is None else cut.describe())
    )
    if REPLAY_MAX_S == float("inf"):
        assert replayed == classes
    for key, future in plan:
        status, result, stderr = future.result()
        if status in (3, 4):  # this machine cannot compute in the record's arithmetic, or has other data
            pytest.skip(f"{name}: {result.get('cannot', stderr)} (this CPU: {_record._cpu_model()})")
        assert status in (0, 1), f"{name} unit {key}: replay failed (exit {status}):\n{stderr}"
        if key is None:  # table.csv is what the units give
            assert not result["table_problems"], f"{name} table.csv: {result['table_problems']}"
            continue
        if key == CANARY:  # the canary, computed whole, is canary.csv byte for byte
            assert not result["table_problems"], f"{name} canary: {result['table_problems']}"
            continue
        (check,) = result["checks"]
        assert check["key"] == key
        assert check["epochs"] in (None, None if cut is None else cut.epochs)  # None: whole (no per-epoch rows)
        assert not check["problems"], (
            f"{name} unit {key} (NTK_REPLAY_SEED={replay_seed()}; this CPU: {_record._cpu_model()}, arithmetic "
            f"{_arithmetic.describe(result['arithmetic'])}): {check['problems']}"
        )


@pytest.mark.parametrize("name", experiments.EXPERIMENTS)
def test_every_medium_record_is_current(name):
    """Main never holds a stale record (a changed configuration lands with its re-recording), and every record has
    its canary (what the code computes is checked by the replays above)."""
    try:
        meta = recorded(name, "medium").meta
    except RecordMissing as missing:
        pytest.skip(str(missing))
    assert not meta["stale"], f"the {name} record is stale ({'; '.join(meta['stale_reasons'])}): {meta['refresh']}"
    assert isinstance(meta.get("canary"), dict), f"the {name} record has no canary: replay {name} --canary --record"


def test_first_units_go_first_and_the_record_does_not_depend_on_it(data_env, monkeypatch):
    computed = []
    compute_unit = _runner.RunContext._compute_unit

    def noting(path, identity, fn):
        computed.append(identity["unit"])
        return compute_unit(path, identity, fn)

    monkeypatch.setattr(_runner.RunContext, "_compute_unit", staticmethod(noting))
    plain = _record_tiny(data_env / "plain")
    order = [u["method"] for u in computed][:5]  # the record's units (its canary's follow)
    assert order == ["GD", "rdi", "rdi", "aux", "aux"]  # the experiment's own order
    computed.clear()
    first = experiments.record(
        "setting1", "quick", root=data_env / "first", first=[{"method": "aux", "lam": 2.0}], **TINY
    )
    # the unit asked for first, then the rest in the experiment's order
    assert [(u["method"], u["lam"]) for u in computed[:5]] == [
        ("aux", 2.0),
        ("GD", None),
        ("rdi", 0.5),
        ("rdi", 2.0),
        ("aux", 0.5),
    ]
    assert first.meta["units_computed"] == 5
    folders = [record_dir("setting1", "quick", data_env / r) for r in ("plain", "first")]
    assert (folders[0] / "table.csv").read_bytes() == (folders[1] / "table.csv").read_bytes()
    assert plain.table.equals(first.table)
    with pytest.raises(ValueError, match="no unit's key holds .*looks like .*'method'"):
        experiments.record("setting1", "quick", root=data_env / "none", first=[{"method": "sgd"}], **TINY)
    with pytest.raises(ValueError, match="non-empty dict"):
        experiments.record("setting1", "quick", root=data_env / "none", first=[{}], **TINY)
    assert main(["run", "setting1", "--first", "{bad"]) == 2  # not JSON
    assert main(["run", "setting1", "--first", '{"n": 1}']) == 2  # only with --record


def test_a_record_is_current_because_it_replays_and_its_canary_sees_what_the_units_do_not(data_env, monkeypatch):
    """A record is made with its canary; a refactor (another code fingerprint, the same numbers) leaves it current
    with no ritual; a change that moves one number computed beside the units (Setting 1's kernel ridge regression,
    by 1e-9 relative) passes every unit replay but fails the canary, byte for byte; an edited canary.csv or a
    record without a canary is named."""
    import ntk_core.experiments.setting1 as setting1_module
    from ntk_core.experiments import _canary

    root = data_env / "records"
    _tiny_is_the_quick_profile(monkeypatch)
    _record_tiny(root)
    folder = record_dir("setting1", "quick", root)
    meta = recorded("setting1", "quick", root=root).meta
    assert not meta["stale"] and meta["files"]["canary.csv"] == _record._store.sha256_bytes(
        (folder / "canary.csv").read_bytes()
    )
    assert meta["canary"]["config"]["n_train"] == _canary.SHRINK["setting1"]["n_train"]
    assert _canary.check_canary("setting1", "quick", root=root) == []
    # a refactor: the fingerprint moves, no number does: current, nothing to do
    monkeypatch.setattr(_runner, "code_fingerprint", lambda name=None: "0123456789ab")
    assert not recorded("setting1", "quick", root=root).meta["stale"]
    # one number beside the units moves in its last bits: the units replay, the canary does not
    krr_path = setting1_module.krr_path
    monkeypatch.setattr(setting1_module, "krr_path", lambda *a, **k: krr_path(*a, **k) * (1 + 1e-9))
    checks = replay("setting1", "quick", root=root, per_class=True, tol=0.0)
    assert checks and all(not c.problems for c in checks)
    problems = _canary.check_canary("setting1", "quick", root=root)
    assert problems and all("this code gives" in p for p in problems), problems
    assert any("val_mse" in p for p in problems), problems  # the KRR rows' validation MSE
    monkeypatch.setattr(setting1_module, "krr_path", krr_path)
    # the canary is never written over, and an edited one is refused
    with pytest.raises(FileExistsError, match="has a canary already"):
        _canary.record_canary("setting1", "quick", root=root)
    (folder / "canary.csv").write_bytes((folder / "canary.csv").read_bytes() + b"\n")
    with pytest.raises(ValueError, match="canary.csv: SHA-256 differs"):
        recorded("setting1", "quick", root=root)


def test_arithmetic_mismatch_names_what_differs():
    pinned = {**_arithmetic.PINS, "cpu_capability": "AVX2"}
    assert _arithmetic.mismatch(pinned, dict(pinned)) is None
    why = _arithmetic.mismatch(pinned, {**pinned, "MKL_CBWR": None, "cpu_capability": "DEFAULT"})
    assert "MKL_CBWR 'AVX2' recorded, None here" in why and "'AVX2' recorded, 'DEFAULT' here" in why
    assert _arithmetic.of_record({"arithmetic": pinned}) == {**pinned, "mkl_branch": None}  # its CPU not named
    # the medium records: MKL_CBWR=AVX2, which runs AVX2 on an Intel CPU and AUTO on any other; a record written
    # before the branch was recorded gets it from the CPU it names
    old = {**pinned, "MKL_CBWR": "AVX2"}
    amd, intel = ({**old, "mkl_branch": branch} for branch in ("AUTO", "AVX2"))
    assert "mkl_branch 'AUTO' recorded, 'AVX2' here (MKL_CBWR=AVX2 runs" in _arithmetic.mismatch(amd, intel)
    assert _arithmetic.mismatch(amd, {**amd, "mkl_branch": None}) is None  # unknown here: not compared
    for processor, branch in (("AMD EPYC", "AUTO"), ("Intel(R) Xeon(R) Platinum 8481C", "AVX2"), ("", None)):
        assert _arithmetic.of_record({"arithmetic": old, "machine": {"processor": processor}})["mkl_branch"] == branch
    assert _arithmetic.of_record({"arithmetic": amd, "machine": {"processor": "Intel"}}) == amd  # recorded: kept
    # only MKL's branch differs: replayed to the cross-branch tolerance, not refused; anything else besides: refused
    assert _arithmetic.only_mkl_branch_differs(amd, intel) and _arithmetic.only_mkl_branch_differs(intel, amd)
    assert not _arithmetic.only_mkl_branch_differs(amd, amd)
    assert not _arithmetic.only_mkl_branch_differs(amd, {**intel, "cpu_capability": "AVX512"})
    assert not _arithmetic.only_mkl_branch_differs(amd, {**intel, "OPENBLAS_CORETYPE": None})
    assert set(_arithmetic.CROSS_BRANCH_TOL) == {"bound_scale"}  # float64 without training: the others have none
    # NumPy's loops: their SIMD target is compared where both sides know it; a record made before NumPy's pin (no
    # NPY_DISABLE_CPU_FEATURES, no numpy_simd) replays with NumPy's own choice, as it was computed
    avx2, avx512 = ({**amd, "numpy_simd": simd} for simd in ("AVX2", "AVX512_SKX"))
    assert "numpy_simd 'AVX2' recorded, 'AVX512_SKX' here" in _arithmetic.mismatch(avx2, avx512)
    assert _arithmetic.mismatch(avx2, {**avx2, "numpy_simd": None}) is None
    four = {k: v for k, v in amd.items() if k != "NPY_DISABLE_CPU_FEATURES"}
    assert _arithmetic.mismatch(four, {**four, "NPY_DISABLE_CPU_FEATURES": None, "numpy_simd": "AVX512_ICL"}) is None
    assert "NPY_DISABLE_CPU_FEATURES" not in _arithmetic.environment(four, {"NPY_DISABLE_CPU_FEATURES": "AVX2"})
    assert _arithmetic.environment(None, {"PATH": "/bin", "MKL_CBWR": "AVX2"}) == {"PATH": "/bin"}
    assert _arithmetic.environment(pinned, {})["ONEDNN_MAX_CPU_ISA"] == "AVX2"


def test_the_pins_change_the_arithmetic_of_this_cpu():
    """Why records pin the arithmetic: where the CPU has AVX-512, one SGD run on a small CNN ends with other bits
    (of its weights, not only of its last loss, which can agree to the last bit by chance) when ATen, oneDNN and
    MKL are held to AVX2 (so an unpinned record would not replay on an AVX2 CPU), and so does NumPy's ``arccos``
    (the infinite-width kernels' angle) once NumPy's loops are; and MKL does run a reproducible branch once pinned
    (``AVX2`` on an Intel CPU, ``AUTO`` on any other; ``COMPATIBLE``, the canaries', on both), against none without
    the pin."""
    script = (
        "import hashlib, numpy as np, torch; torch.manual_seed(0); torch.set_num_threads(1); nn = torch.nn\n"
        "from ntk_core.experiments._arithmetic import mkl_branch, numpy_simd\n"
        "net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),\n"
        "                    nn.Flatten(), nn.Linear(16 * 16 * 16, 64), nn.ReLU(), nn.Linear(64, 1))\n"
        "x = torch.randn(64, 3, 16, 16); y = torch.randn(64, 1); opt = torch.optim.SGD(net.parameters(), lr=0.01)\n"
        "for _ in range(20):\n"
        "    opt.zero_grad(); loss = ((net(x) - y) ** 2).mean(); loss.backward(); opt.step()\n"
        "weights = hashlib.sha256(b''.join(p.detach().numpy().tobytes() for p in net.parameters())).hexdigest()\n"
        "angle = np.arccos(np.random.default_rng(0).uniform(-1, 1, 10**5))\n"
        "print(torch.backends.cpu.get_cpu_capability(), mkl_branch(), weights, numpy_simd(),\n"
        "      hashlib.sha256(angle.tobytes()).hexdigest())\n"
    )

    def run(env):
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
        return out.stdout.split()

    native = run(_arithmetic.environment(None))
    pinned = run(_arithmetic.environment(_arithmetic.PINS))
    assert native[1] == "BRANCH_OFF" and pinned[1] in ("AVX2", "AUTO"), (native, pinned)
    assert run(_arithmetic.environment(_arithmetic.CANARY_PINS))[1] == "COMPATIBLE"
    assert pinned[3] == "AVX2", (native, pinned)  # NumPy's loops held to AVX2 (its pin names every target above)
    assert run(_arithmetic.environment(_arithmetic.PINS)) == pinned  # and the pinned run is reproducible
    if native[3].startswith("AVX512"):
        assert pinned[4] != native[4], (native, pinned)
    if native[0] != "AVX512":
        pytest.skip(f"this CPU runs {native[0]} kernels already: nothing to pin away")
    assert pinned[0] == "AVX2" and pinned[2] != native[2], (native, pinned)


def test_an_edited_provenance_or_table_is_found(data_env, capsys):
    root = data_env / "records"
    _record_tiny(root)
    folder = record_dir("setting1", "quick", root)
    path = folder / "provenance.json"
    original = path.read_text()
    # one digit of a data fingerprint: the seal no longer matches (before, the replay test skipped: "other data")
    prov = json.loads(original)
    fp = prov["data_fingerprints"][0]
    prov["data_fingerprints"][0] = fp[:-1] + ("0" if fp[-1] != "0" else "1")
    path.write_text(json.dumps(prov))
    with pytest.raises(ValueError, match="do not match its seal"):
        recorded("setting1", "quick", root=root)
    # a field of the wrong type, or missing: named, not a traceback
    for edit in ({"files": "table.csv"}, {"machine": None}):
        path.write_text(json.dumps({**json.loads(original), **edit}))
        with pytest.raises(ValueError, match=f"field '{next(iter(edit))}' is missing or not a dict"):
            recorded("setting1", "quick", root=root)
    for drop in (["seal"], ["seal", "arithmetic"]):  # without its seal (and its arithmetic: as if made before pins)
        prov = json.loads(original)
        for field in drop:
            del prov[field]
        path.write_text(json.dumps(prov))
        with pytest.raises(ValueError, match="seal is missing"):
            recorded("setting1", "quick", root=root)
    path.write_text(original)
    assert _record.check_table("setting1", "quick", root=root) == []
    # a number of table.csv changed, its checksum and the seal updated: the units give another table
    table = (folder / "table.csv").read_text().splitlines()
    row = table[1].split(",")
    col = table[0].split(",").index("test_error")
    row[col] = repr(float(row[col]) + 0.01)
    table[1] = ",".join(row)
    (folder / "table.csv").write_text("\n".join(table) + "\n")
    prov = json.loads(original)
    prov["files"]["table.csv"] = _record._store.sha256_bytes((folder / "table.csv").read_bytes())
    _record._write_provenance(path, prov)
    assert len(recorded("setting1", "quick", root=root).table) > 0  # it reads as a sound record ...
    problems = _record.check_table("setting1", "quick", root=root)
    assert len(problems) == 1 and "row 0 test_error" in problems[0]  # ... but is not what its units give


def test_every_class_is_replayed_whatever_the_seed():
    units = (
        [{"key": {"seed": s, "noise": 0.2, "spectrum": True}, "seconds": 0.1 + s} for s in range(3)]
        + [
            {"key": {"seed": s, "noise": 0.2, "method": m, "lam": lam}, "seconds": 10.0 + s + lam}
            for s in range(3)
            for m in ("aux", "rdi")
            for lam in (0.5, 4.0)
        ]
        + [
            {"key": {"seed": s, "noise": 0.2, "method": "early_stopping", "lam": None}, "seconds": 5.0}
            for s in range(3)
        ]
    )
    classes = {unit_class(u["key"]) for u in units}
    assert len(classes) == 4  # spectrum, aux, rdi, early stopping (lam None is not a number)
    for seed in range(20):
        chosen = choose_units(units, seed=seed, per_class=True)
        assert {unit_class(u["key"]) for u in chosen} == classes and len(chosen) == 4
        # each drawn among the cheaper half of its class
        assert all(u["seconds"] < 13.0 for u in chosen if u["key"].get("method") in ("aux", "rdi"))
    # a budget keeps the cheapest classes that fit together, and refuses when not even one unit fits
    assert [unit_class(u["key"]) for u in choose_units(units, seed=0, per_class=True, max_seconds=4.0)] == [
        unit_class(units[0]["key"])
    ]
    with pytest.raises(ReplayTooCostly):
        choose_units(units, per_class=True, max_seconds=0.05)


def test_a_budget_replays_a_sample_of_the_classes_of_all_records_that_changes_with_the_seed():
    a = [{"key": {"seed": s, "method": m, "lam": 1.0}, "seconds": 10.0 + s} for s in range(4) for m in ("x", "y")]
    b = [{"key": {"seed": s, "loss": loss}, "seconds": 50.0 + s} for s in range(4) for loss in ("ce", "mse")]
    c = [{"key": {"seed": s}, "seconds": 500.0} for s in range(2)]  # over any budget below 500 s
    records = {"a": a, "b": b, "c": c}
    every = {(n, unit_class(u["key"])) for n, units in records.items() for u in units}
    # no budget: one unit of every class of every record, each among the cheaper half of its class
    for seed in range(5):
        chosen = choose_across(records, seed=seed)
        assert sorted((n, unit_class(u["key"])) for n, units in chosen.items() for u in units) == sorted(every)
        assert all(u["seconds"] <= 11.0 for u in chosen["a"]) and all(u["seconds"] <= 51.0 for u in chosen["b"])
    # a budget of 70 s: what is taken fits it, at most one unit per class, an entry for every record
    drawn = set()
    for seed in range(40):
        chosen = choose_across(records, seed=seed, max_seconds=70.0)
        assert set(chosen) == {"a", "b", "c"} and not chosen["c"]
        assert sum(u["seconds"] for units in chosen.values() for u in units) <= 70.0
        picked = [(n, unit_class(u["key"])) for n, units in chosen.items() for u in units]
        assert len(picked) == len(set(picked)) >= 2  # the budget is used: b (~51 s) and a (~11 s) fit together
        drawn |= set(picked)
    # over the seeds every class that fits the budget is replayed in turn
    assert drawn == {p for p in every if p[0] != "c"}


def test_a_replay_in_another_arithmetic_is_refused_and_the_cli_restarts_in_the_recorded_one(data_env, monkeypatch):
    """A record computed with the libraries held to AVX2 (the command line's pins) is replayed in a process that
    starts with the same pins; this test's process is not pinned, so an in-process replay must refuse."""
    root = data_env / "records"
    env = {**os.environ, "NTK_CORE_RECORDS": str(root), "OMP_NUM_THREADS": "1"}
    args = [f"--set={k}={v!r}" for k, v in TINY.items()]
    done = subprocess.run(
        [sys.executable, "-m", "ntk_core", "run", "setting1", "--profile", "quick", "--record", *args],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    meta = recorded("setting1", "quick", root=root).meta
    assert meta["arithmetic"] == {
        **_arithmetic.PINS,
        "cpu_capability": "AVX2",
        "mkl_branch": meta["arithmetic"]["mkl_branch"],
        "numpy_simd": "AVX2",
    }
    assert meta["arithmetic"]["mkl_branch"] in ("AVX2", "AUTO")  # what MKL runs with MKL_CBWR=AVX2 (Intel, other)
    assert meta["canary"]["arithmetic"]["mkl_branch"] == "COMPATIBLE"  # the canary's, on Intel and AMD alike
    if not _arithmetic.pinned():
        with pytest.raises(ArithmeticDiffers, match="ATEN_CPU_CAPABILITY 'avx2' recorded"):
            replay("setting1", "quick", root=root, seed=0)
    out = data_env / "replay.json"
    again = subprocess.run(
        [sys.executable, "-m", "ntk_core", "replay", "setting1", "--profile", "quick", "--json", str(out)],
        env=env,
        capture_output=True,
        text=True,
    )
    assert again.returncode == 0, again.stderr
    result = json.loads(out.read_text())
    assert result["arithmetic"]["cpu_capability"] == "AVX2" and len(result["checks"]) == 3
    assert all(not c["problems"] for c in result["checks"])
    # a process held to another instruction set (and told not to restart) cannot, and says why (exit 3)
    other = subprocess.run(
        [sys.executable, "-m", "ntk_core", "replay", "setting1", "--profile", "quick"],
        env={**_arithmetic.environment(None, env), "NTK_CORE_REEXEC": "1"},
        capture_output=True,
        text=True,
    )
    assert other.returncode == 3 and "cannot compute in the arithmetic" in other.stderr
    # from the command, which restarted in the record's pins already, the advice is a machine, not this command
    assert "replay it on a machine like the recording's" in other.stderr and "restarts itself" not in other.stderr
    canary = subprocess.run(
        [sys.executable, "-m", "ntk_core", "replay", "setting1", "--profile", "quick", "--canary"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert canary.returncode == 0 and "canary: equal, byte for byte" in canary.stdout, canary.stderr


#: the bound study shrunk to seconds (its canary's sizes)
TINY_BOUND = dict(binary_sizes=(60, 120), multiclass_sizes=(60, 120), empirical_n=60, width=64, n_test=100,
                  seeds=(0,), lams=(0.25, 32.0), grid_max_n=60, one_subset_above=120, memory_budget=1 << 20)  # fmt: skip


def test_a_record_of_the_other_mkl_branch_replays_to_the_cross_branch_tolerance(data_env, monkeypatch):
    """The medium records are made with ``MKL_CBWR=AVX2`` (MKL's ``AUTO`` branch on AMD, ``AVX2`` on Intel). A
    record of the bound study made so replays in a process whose only difference is MKL's branch (here
    ``COMPATIBLE``, as an Intel CPU runs ``AVX2``): not refused (exit 3) but compared to its ``CROSS_BRANCH_TOL``,
    and said so; a change of the kernel by 10⁻⁴ relative still fails it; an experiment that trains networks (no
    such tolerance) and anything else differing are still refused, saying why."""
    root = data_env / "records"
    env = {**os.environ, "NTK_CORE_RECORDS": str(root), "OMP_NUM_THREADS": "1", "NTK_CORE_REEXEC": "1"}
    args = [f"--set={k}={v!r}" for k, v in TINY_BOUND.items()]
    command = [sys.executable, "-m", "ntk_core"]
    done = subprocess.run([*command, "run", "bound_scale", "--profile", "quick", "--record", *args],
                          env=_arithmetic.environment(_arithmetic.PINS, env), capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    provenance = json.loads((record_dir("bound_scale", "quick", root) / "provenance.json").read_text())
    assert provenance["arithmetic"]["MKL_CBWR"] == "AVX2" and provenance["arithmetic"]["mkl_branch"] != "COMPATIBLE"
    out = data_env / "replay.json"
    other_branch = _arithmetic.environment(_arithmetic.CANARY_PINS, env)  # NTK_CORE_REEXEC: it stays in them
    for which in (["--json", str(out)], ["--table"]):
        again = subprocess.run([*command, "replay", "bound_scale", "--profile", "quick", *which], env=other_branch,
                               capture_output=True, text=True)  # fmt: skip
        assert again.returncode == 0, again.stdout + again.stderr
        assert "MKL runs another branch here than in the record" in again.stdout, again.stdout
    result = json.loads(out.read_text())
    assert result["tolerance"] == _arithmetic.CROSS_BRANCH_TOL["bound_scale"] and result["checks"]
    assert all(not c["problems"] for c in result["checks"])
    # in-process, with this process's arithmetic shown as the record's but for MKL's branch
    branch_only = {**_arithmetic.of_record(provenance), "mkl_branch": "COMPATIBLE", "MKL_CBWR": "COMPATIBLE"}
    monkeypatch.setattr(_arithmetic, "current", lambda: dict(branch_only))
    assert _record.require_arithmetic("bound_scale", provenance) == _arithmetic.CROSS_BRANCH_TOL["bound_scale"]
    with pytest.raises(ArithmeticDiffers, match="setting1 trains networks"):
        _record.require_arithmetic("setting1", provenance)
    import ntk_core.experiments.bound_scale as bound_module

    kernel = bound_module._kernel
    monkeypatch.setattr(bound_module, "_kernel", lambda *a: kernel(*a) * (1 + 1e-4))
    checks = replay("bound_scale", "quick", root=root, per_class=True)
    assert any(c.problems for c in checks), [c.problems for c in checks]  # the units on the infinite kernel
    monkeypatch.setattr(_arithmetic, "current", lambda: {**branch_only, "cpu_capability": "AVX512"})
    with pytest.raises(ArithmeticDiffers, match="cpu_capability 'AVX2' recorded, 'AVX512' here"):
        _record.require_arithmetic("bound_scale", provenance)


def test_replay_options_are_checked_before_any_work_and_named(data_env, monkeypatch, capsys):
    """Each bad option of ``replay`` exits 2 naming it, before anything is computed: a budget that is not
    positive, a key that is not JSON or that no unit has, a --json file in a missing folder, --record alone."""
    root = data_env / "records"
    monkeypatch.setenv("NTK_CORE_RECORDS", str(root))
    _record_tiny(root)
    computed = []
    monkeypatch.setattr(_record, "_compute_as_recorded", lambda *a, **k: computed.append(a))
    base = ["replay", "setting1", "--profile", "quick"]
    for option, message in (
        (["--max-seconds", "0"], "--max-seconds: takes a positive number of seconds"),
        (["--key", "{bad"], "--key: takes a unit's key as a JSON object"),
        (["--key", "[1]"], "--key: takes a unit's key as a JSON object"),
    ):
        with pytest.raises(SystemExit) as code:
            main(base + option)
        assert code.value.code == 2 and message in capsys.readouterr().err
    for option, message in (
        (["--key", '{"seed": 99}'], 'error: --key {"seed": 99}: no unit of the setting1 record has this key'),
        (["--json", str(data_env / "missing" / "out.json")], "its folder"),
        (["--record"], "--record adds a canary: use it with --canary"),
    ):
        assert main(base + option) == 2
        assert message in capsys.readouterr().err
    assert not computed  # refused before any work


def test_record_round_trips_and_replays(data_env):
    root = data_env / "records"
    fresh = _record_tiny(root)
    folder = record_dir("setting1", "quick", root)
    assert sorted(p.name for p in folder.iterdir()) == [
        "canary.csv",
        "provenance.json",
        "table.csv",
        "units.json",
        "work",
    ]
    again = recorded("setting1", "quick", root=root)
    pd.testing.assert_frame_equal(again.table, fresh.table, check_exact=True)
    # the same numbers as an ordinary run of the same config, bit for bit
    ordinary = experiments.run("setting1", "quick", **TINY)
    pd.testing.assert_frame_equal(again.table, ordinary.table, check_exact=True, check_dtype=False)
    meta = again.meta
    for field in (
        "config",
        "config_hash",
        "code",
        "git",
        "data",
        "data_fingerprints",
        "machine",
        "versions",
        "wall_time_s",
        "recorded_at",
        "files",
    ):
        assert field in meta, field
    assert meta["units"] == 1 + 2 * 2 and meta["units_computed"] == 5 and meta["units_resumed"] == 0
    # a quick config overridden is not the quick profile: stale, with the command that refreshes it
    assert meta["stale"] and "configuration" in meta["stale_reasons"][0]
    assert meta["refresh"] == "python -m ntk_core run setting1 --profile quick --record"
    # every unit replays to the recorded rows
    checks = replay("setting1", "quick", units=5, root=root, seed=0)
    assert len(checks) == 5 and all(not c.problems for c in checks)
    # a replay budget below every unit's recorded time chooses nothing, and says so
    with pytest.raises(ReplayTooCostly, match="over the replay budget of 0 s"):
        replay("setting1", "quick", units=2, root=root, seed=0, max_seconds=0.0)
    # the budget holds the chosen units together: one unit fits in 1.5 times the cheapest, two do not
    cheapest = min(u["seconds"] for u in json.loads((folder / "units.json").read_text()))
    one = replay("setting1", "quick", units=2, root=root, seed=0, max_seconds=1.5 * cheapest)
    assert len(one) == 1 and not one[0].problems
    # each unit's seconds, as units.json holds them, with its key; a units.json edited by hand is refused
    seconds = experiments.unit_seconds("setting1", "quick", root=root)
    listed = json.loads((folder / "units.json").read_text())
    assert len(seconds) == len(listed) == 5 and "seconds" in seconds.columns
    assert seconds["seconds"].sum() == pytest.approx(meta["unit_seconds_total"], rel=1e-12)
    assert sorted(seconds["seed"].tolist()) == sorted(u["key"]["seed"] for u in listed)
    (folder / "units.json").write_text(json.dumps(listed[:-1]))
    with pytest.raises(ValueError, match="SHA-256 differs"):
        experiments.unit_seconds("setting1", "quick", root=root)
    with pytest.raises(RecordMissing):
        experiments.unit_seconds("setting1", "medium", root=root)


def test_replay_detects_a_changed_value(data_env):
    root = data_env / "records"
    _record_tiny(root)
    folder = record_dir("setting1", "quick", root)
    units = json.loads((folder / "units.json").read_text())
    units[0]["rows"][0]["test_error"] += 1e-3
    (folder / "units.json").write_text(json.dumps(units))
    with pytest.raises(ValueError, match="SHA-256 differs"):  # edited without updating the provenance
        replay("setting1", "quick", root=root, keys=[units[0]["key"]])
    prov = json.loads((folder / "provenance.json").read_text())
    prov["files"]["units.json"] = _record._store.sha256_bytes((folder / "units.json").read_bytes())
    (folder / "provenance.json").write_text(json.dumps(prov))
    with pytest.raises(ValueError, match="do not match its seal"):  # the checksum updated, the seal not
        replay("setting1", "quick", root=root, keys=[units[0]["key"]])
    _record._write_provenance(folder / "provenance.json", prov)  # sealed again: the replay finds the number
    checks = replay("setting1", "quick", root=root, keys=[units[0]["key"]])
    assert len(checks) == 1 and any("test_error" in p for p in checks[0].problems)


#: the tiny Setting 3 of the end-to-end test run for 8 epochs, the learning rate decayed after epoch 6: one loss, one λ
SETTING3_TINY = {
    **CIFAR_TINY["setting3"],
    "epochs": 8,
    "lr_milestones": (6,),
    "noise_levels": (0.4,),
    "losses": ("ce",),
    "lam_grid": (1.0,),
}


def test_an_epoch_cut_trains_the_first_epochs_and_compares_them_bit_for_bit(data_env, monkeypatch):
    from ntk_core.experiments import setting3

    root = data_env / "records"
    experiments.record("setting3", "quick", root=root, **SETTING3_TINY)
    cut = cut_of_record("setting3", "quick", root)
    assert (cut.parts, cut.epochs, cut.of) == (("curves",), _record.CUT_EPOCHS, 8)
    short = cut.config(experiments.make_config("setting3", "quick", **SETTING3_TINY))
    assert (short.epochs, short.lr_milestones) == (4, ())  # the milestone after the cut is left out
    checks = replay("setting3", "quick", root=root, per_class=True, partial=True)
    assert len(checks) == 2 and all(not c.problems and c.epochs == 4 for c in checks), [c.problems for c in checks]
    for c in checks:  # the per-epoch rows of epochs 1-4, nothing else
        assert [r["epoch"] for r in c.replayed] == [1, 2, 3, 4] and {r["part"] for r in c.replayed} == {"curves"}

    train_config = setting3._train_config

    def with_change(**change):
        monkeypatch.setattr(setting3, "_train_config", lambda *a: dataclasses.replace(train_config(*a), **change))

    # the learning rate 2^-20 (relative; the network is float32) off from the first step: the exact comparison finds it
    with_change(lr=train_config(short, "ce", None, 0).lr * (1 + 2**-20))
    found = replay("setting3", "quick", root=root, per_class=True, partial=True)
    assert all(c.problems for c in found), "a last-bit change of every step passed the cut replay"
    # a change that only the later epochs run (the decay after epoch 6) is not seen by the cut, only by a whole
    # replay: what the cut leaves out
    with_change(lr_gamma=0.5)
    assert all(not c.problems for c in replay("setting3", "quick", root=root, per_class=True, partial=True))
    assert all(c.problems for c in replay("setting3", "quick", root=root, per_class=True))


def test_a_row_cut_replays_the_rows_at_the_leading_lambda_without_the_grid(data_env, monkeypatch):
    """``bound_scale``'s cheaper replay (``REPLAY_ROWS``): the config without the λ grid computes each unit's rows at
    λ* exactly as the whole config did; a change that only the grid's rows run passes it and fails a whole replay,
    a change of λ* fails it."""
    from ntk_core.experiments import bound_scale
    from test_experiments import TINY as EXPERIMENT_TINY

    root = data_env / "records"
    experiments.record("bound_scale", "quick", root=root, **{**EXPERIMENT_TINY["bound_scale"], "grid_max_n": 100})
    cut = cut_of_record("bound_scale", "quick", root)
    grid = experiments.make_config("bound_scale", "quick").lams
    assert (
        isinstance(cut, _record.RowCut) and cut.config(experiments.make_config("bound_scale", "quick")).lams == grid[:1]
    )
    assert cut.describe() == "their rows with lam_kind in ['leading'] (the λ grid cut to its first λ)"
    checks = replay("bound_scale", "quick", root=root, per_class=True, partial=True)
    assert len(checks) == 5 and all(not c.problems and c.epochs is None for c in checks), [c.problems for c in checks]
    assert all(c.replayed and {r["lam_kind"] for r in c.replayed} == {"leading"} for c in checks)
    rows = {
        json.dumps(u["key"], sort_keys=True): u["rows"]
        for u in json.loads((record_dir("bound_scale", "quick", root) / "units.json").read_text())
    }
    assert sum(len(rows[json.dumps(c.key, sort_keys=True)]) - len(c.recorded) for c in checks) > 0  # grid rows left out
    lambdas = bound_scale._lambdas

    def grid_moved(config, n, lam_star):
        return [(lam * (1 + 1e-3) if kind == "grid" else lam, kind, r) for lam, kind, r in lambdas(config, n, lam_star)]

    monkeypatch.setattr(bound_scale, "_lambdas", grid_moved)
    assert all(not c.problems for c in replay("bound_scale", "quick", root=root, per_class=True, partial=True))
    assert any(c.problems for c in replay("bound_scale", "quick", root=root, per_class=True))
    monkeypatch.setattr(bound_scale, "_lambdas", lambdas)
    leading = bound_scale.bounds.leading_lambda
    monkeypatch.setattr(bound_scale.bounds, "leading_lambda", lambda *a: leading(*a) * (1 + 1e-3))
    assert all(c.problems for c in replay("bound_scale", "quick", root=root, per_class=True, partial=True))


def test_an_experiment_without_per_epoch_rows_is_replayed_whole(data_env):
    root = data_env / "records"
    _record_tiny(root)
    assert cut_of_record("setting1", "quick", root) is None
    checks = replay("setting1", "quick", root=root, per_class=True, partial=True)
    assert checks and all(c.epochs is None and not c.problems for c in checks)


def test_interrupted_recording_resumes(data_env, monkeypatch):
    root = data_env / "records"
    _tiny_is_the_quick_profile(monkeypatch)
    _record_tiny(root)
    folder = record_dir("setting1", "quick", root)
    (folder / "provenance.json").unlink()  # as if killed before the end: the units are in work/
    with pytest.raises(RecordMissing, match="a recording is under way: 5 finished units .*--record"):
        recorded("setting1", "quick", root=root)
    assert _record.units_in_progress("setting1", "quick", root=root) == 5
    with monkeypatch.context() as m:  # units of other code are not this recording's: not counted
        m.setattr(_record, "config_hash", lambda name, config: "0123456789abcdef")
        assert _record.units_in_progress("setting1", "quick", root=root) == 0
        with pytest.raises(RecordMissing) as missing:
            recorded("setting1", "quick", root=root)
        assert "under way" not in str(missing.value)
    again = _record_tiny(root)
    assert again.meta["units_resumed"] == 5 and again.meta["units_computed"] == 0


def test_a_new_record_removes_the_unit_stores_of_earlier_configurations(data_env):
    root = data_env / "records"
    _record_tiny(root)
    work = record_dir("setting1", "quick", root) / "work"
    (first,) = work.glob("*.units")
    experiments.record("setting1", "quick", root=root, **{**TINY, "steps": 12})
    (second,) = work.glob("*.units")  # the first configuration's units are gone, the new ones stay
    assert second != first and any(second.iterdir())
    # a store whose lock is held (a recording under way) is left alone
    busy = work / "feedfeedfeedfeed.units"
    busy.mkdir()
    with _record._store.file_lock(work / "feedfeedfeedfeed.lock"):
        _record_tiny(root)
    assert busy.is_dir() and len(list(work.glob("*.units"))) == 2


def test_show_prints_a_record_and_names_a_missing_one(data_env, monkeypatch, capsys):
    root = data_env / "records"
    monkeypatch.setenv("NTK_CORE_RECORDS", str(root))
    assert main(["show", "setting1", "--profile", "medium"]) == 2
    assert "--profile medium --record" in capsys.readouterr().err
    _record_tiny(root)
    assert main(["show", "setting1", "--profile", "quick"]) == 0
    out = capsys.readouterr().out
    assert "experiment: setting1" in out and "STALE" in out and "GD+RDI" in out


def test_cli_record(data_env, monkeypatch, capsys):
    root = data_env / "records"
    monkeypatch.setenv("NTK_CORE_RECORDS", str(root))
    args = [f"--set={k}={v!r}" for k, v in TINY.items()]
    assert main(["run", "setting1", "--profile", "quick", "--record", *args]) == 0
    assert "record:" in capsys.readouterr().out
    assert (record_dir("setting1", "quick", root) / "provenance.json").exists()


def test_medium_profile_and_an_experiment_without_one(monkeypatch):
    for name in ("setting1", "distance", "difference_trick"):
        config = experiments.make_config(name, "medium")
        assert config.profile == "medium" and config.device == "cpu" and len(config.seeds) == 3

    class Config:
        @classmethod
        def quick(cls):
            return None

    class Module:
        pass

    Module.Config = Config  # type: ignore[attr-defined]
    monkeypatch.setattr(experiments, "get", lambda name: Module)
    with pytest.raises(ValueError, match="has no 'medium' profile yet"):
        experiments.make_config("setting2", "medium")


def test_code_fingerprint_follows_the_code_an_experiment_runs(tmp_path):
    """Docstrings and other bare strings, comments, annotations, profile constructors, Config field defaults and
    code the experiment never reaches leave its fingerprint; code that it runs does not."""
    import shutil
    from pathlib import Path

    from ntk_core.experiments import _code

    package = tmp_path / "ntk_core"
    shutil.copytree(Path(_code.__file__).resolve().parents[1], package, ignore=shutil.ignore_patterns("__pycache__"))
    fp = lambda name="distance": _code.code_fingerprint(name, package)  # noqa: E731
    assert fp() == _code.code_fingerprint("distance") != _code.code_fingerprint("setting3")
    before, whole = fp(), fp(None)

    def edit(name, old, new, count=1):
        path = package / name
        text = path.read_text()
        assert text.count(old) >= count, (name, old)
        path.write_text(text.replace(old, new, count))

    # documentation, comments and annotations (and the import of a type alias used only in annotations)
    krr = package / "krr.py"
    krr.write_text(
        re.sub(
            r"def check_kernel_matrix\(K: [^,]+,", "def check_kernel_matrix(K: 'SomeArray',", krr.read_text(), count=1
        )
    )
    edit(
        "krr.py",
        "from __future__ import annotations\n",
        "from __future__ import annotations\n\nfrom ._typing import ArrayLike  # a type alias\n",
    )
    (package / "_typing.py").write_text("import numpy\nArrayLike = numpy.ndarray\n")
    edit("experiments/setting1.py", '"""', '"""Reworded. ')
    # a new function in a module distance imports from, that distance does not call
    (package / "experiments" / "setting1.py").write_text(
        (package / "experiments" / "setting1.py").read_text() + "\n\ndef headline(table):\n    return table.mean()\n"
    )
    (package / "bookkit" / "studies" / "scaling.py").write_text(
        (package / "bookkit" / "studies" / "scaling.py").read_text() + "\nX = 1\n"
    )
    # sizing a profile: its constructor only chooses config values, which enter a result's identity apart
    edit("experiments/distance.py", "steps=120_000,", "steps=150_000,")
    assert _code.PROFILE_METHODS == experiments.PROFILES
    # a field default of the Config (the resolved values enter a result's identity apart) and an attribute's
    # docstring (a bare string statement, here after _store.FORMAT: it runs nothing)
    edit("experiments/distance.py", "    n_probe: int = 128\n", "    n_probe: int = 64\n")
    edit("_store.py", "FORMAT = 1\n", 'FORMAT = 1\n"""The layout version."""\n')
    assert fp() == before
    assert fp(None) != whole  # the whole package did change
    # ... but a new config field does
    edit("experiments/distance.py", "    counts = {", "    other_default: int = 1\n\n    counts = {")
    assert fp() != before
    edit("experiments/distance.py", "    other_default: int = 1\n\n", "")
    assert fp() == before
    # code that distance runs: the signature of data.mnist_features
    edit("data.py", "def mnist_features(", "def mnist_features(*_unused, ")
    assert fp() != before
    with pytest.raises(ValueError, match="no experiment module"):
        _code.code_fingerprint("setting9", package)


def test_code_fingerprint_survives_a_move_and_follows_an_imported_library(tmp_path):
    """A function moved to another module (its imports following it) leaves the fingerprint; taking a name
    from another library, or an edit of code reached only through a function-level import, changes it."""
    import shutil
    from pathlib import Path

    from ntk_core.experiments import _code

    package = tmp_path / "ntk_core"
    shutil.copytree(Path(_code.__file__).resolve().parents[1], package, ignore=shutil.ignore_patterns("__pycache__"))
    fp = lambda: _code.code_fingerprint("setting1", package)  # noqa: E731
    before = fp()
    # move data.mnist_features (setting1 runs it) into a new module, and re-export it from data.py
    data = (package / "data.py").read_text()
    start = data.index("def mnist_features(")
    end = data.index("\ndef ", start + 1)
    moved = data[start:end]
    (package / "features_moved.py").write_text(
        "from __future__ import annotations\n\nimport numpy as np\n\nfrom .data import sphere_features\n\n\n" + moved
    )
    (package / "data.py").write_text(data[:start] + data[end:] + "\nfrom .features_moved import mnist_features\n")
    assert fp() == before
    # the same statement with a name taken from another library is other code
    krr = (package / "krr.py").read_text()
    assert "import numpy as np" in krr
    (package / "krr.py").write_text(krr.replace("import numpy as np", "import numpy.ma as np", 1))
    assert fp() != before


def test_side_by_side_and_record_line(data_env):
    from ntk_core.bookkit import compare

    quick = pd.DataFrame({"noise": [0.0, 0.2], "method": ["GD", "GD"], "mean": [0.05, 0.2]})
    medium = pd.DataFrame({"noise": [0.2, 0.4], "method": ["GD", "GD"], "mean": [0.15, 0.3]})
    paper = pd.DataFrame({"noise": [0.2], "method": ["GD"], "paper": ["≈ 0.1"]})
    both = compare.side_by_side(quick, medium, ["noise", "method"], "mean", paper)
    assert both.columns.tolist() == ["noise", "method", "quick", "medium", "paper"]
    row = both[both["noise"] == 0.2].iloc[0]
    assert (row["quick"], row["medium"], row["paper"]) == (0.2, 0.15, "≈ 0.1")
    assert both[both["noise"] == 0.4]["quick"].isna().all() and len(both) == 3
    assert both["noise"].tolist() == [0.0, 0.2, 0.4]
    # keys keep the quick order, and a medium-only key follows its predecessor there (no lexicographic sort)
    q = pd.DataFrame({"run": ["λ = 2", "λ = 10", "width 512", "width 1024"], "v": [1.0, 2.0, 3.0, 4.0]})
    m = pd.DataFrame({"run": ["λ = 2", "λ = 10", "λ = 40", "width 512", "width 1024", "width 2048"], "v": 6 * [0.0]})
    order = compare.side_by_side(q, m, ["run"], "v")["run"].tolist()
    assert order == ["λ = 2", "λ = 10", "λ = 40", "width 512", "width 1024", "width 2048"]
    alone = compare.side_by_side(quick, None, ["noise", "method"], "mean")
    assert alone["medium"].isna().all()
    with pytest.raises(ValueError, match="no column"):
        compare.side_by_side(quick, None, ["noise", "seed"], "mean")

    assert "not recorded yet" in compare.record_line("setting1", None)
    with pytest.MonkeyPatch.context() as m:  # a recording under way (its count: test_interrupted_recording_...)
        m.setattr(compare, "units_in_progress", lambda name, profile: 7)
        line = compare.record_line("setting1", None)
    assert "being recorded, 7 units finished" in line and "--record" in line
    assert str(experiments.records_root()) not in line  # no path of the machine that builds the book
    assert not re.search(LOCAL_PATH, line)  # nor anything the book's browser check would take for one
    root = data_env / "records"
    fresh = _record_tiny(root)  # a tiny config: stale against the quick profile's own
    assert "STALE" in compare.record_line("setting1", fresh)
    current = experiments.Result(fresh.table, dict(fresh.meta, stale=False, stale_reasons=[]))
    line = compare.record_line("setting1", current)
    assert "current (this build's configuration; its units and canary replay bit for bit" in line
    assert fresh.meta["code"] not in line  # a fingerprint means nothing to a reader
    stale = dict(fresh.meta, stale=True, stale_reasons=["the quick configuration of setting1 changed"])
    line = compare.record_line("setting1", experiments.Result(fresh.table, stale))
    assert "STALE" in line and "--record" in line
    # the prose's verdicts read from a stale record say so; a current one's say nothing more
    assert compare.stale_note(experiments.Result(fresh.table, stale)).startswith("STALE record")
    assert compare.stale_note(current) == "" and compare.stale_note(None) == ""
    assert [compare.record_state(r) for r in (experiments.Result(fresh.table, stale), current, None)] == [
        "STALE",
        "current",
        "not recorded",
    ]
    rows = compare.config_table(fresh).set_index("parameter")["value"]
    assert rows["width"] == "16" and rows["λ grid"] == "0.5, 2" and "profile" not in rows.index


def test_records_are_never_written_into_an_installed_package(tmp_path, monkeypatch, capsys):
    """Outside a checkout (a wheel in site-packages) there is no results/ folder: say so, write nothing."""
    installed = tmp_path / "site-packages"
    (installed / "ntk_core").mkdir(parents=True)
    monkeypatch.setattr(_record, "_REPO", installed)
    monkeypatch.delenv("NTK_CORE_RECORDS", raising=False)
    with pytest.raises(RecordMissing, match="installed outside a project checkout.*NTK_CORE_RECORDS"):
        _record.records_root()
    assert main(["run", "setting1", "--profile", "quick", "--record", "--set", "steps=4"]) == 2
    assert "NTK_CORE_RECORDS" in capsys.readouterr().err
    assert sorted(p.name for p in installed.iterdir()) == ["ntk_core"]
    monkeypatch.setenv("NTK_CORE_RECORDS", str(tmp_path / "mine"))
    assert _record.records_root() == tmp_path / "mine"
