"""No command writes over a file it did not make: an output that is one of the command's inputs is refused whatever
``--overwrite`` says, an existing file that another command (or the user) wrote is refused without ``--overwrite``,
and the command's own earlier output (told by its content) is replaced. Every check happens before the work, so a
refused command leaves every file as it was."""

from __future__ import annotations

import json
import os
import sys
import textwrap

import numpy as np
import pytest

from ntk_core._checks import check_output_path, json_written_with
from ntk_core.__main__ import main

MODELS = textwrap.dedent(
    """
    import torch

    def make():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    """
)


@pytest.fixture
def folder(tmp_path, monkeypatch):
    (tmp_path / "nets_here.py").write_text(MODELS)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("nets_here", None)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(12, 5))
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "K.npy", x @ x.T + np.eye(12))
    np.save(tmp_path / "y.npy", np.sign(rng.normal(size=12)))
    yield tmp_path
    sys.modules.pop("nets_here", None)


def _unchanged(path, before: bytes) -> bool:
    return path.read_bytes() == before


def test_gram_and_kernel_never_write_over_their_inputs_or_a_users_file(folder, capsys):
    x = folder / "x.npy"
    before = x.read_bytes()
    gram = ["gram", "--model", "nets_here:make", "--inputs", str(x), "--dtype", "float64"]
    for extra in ([], ["--overwrite"]):  # the inputs are refused whatever --overwrite says
        assert main([*gram, "--out", str(x), *extra]) == 2
        assert "--out" in capsys.readouterr().err and _unchanged(x, before)
        assert main(["kernel", "--infinite", "setting1", "--inputs", str(x), "--out", str(x), *extra]) == 2
        assert "is also --inputs" in capsys.readouterr().err and _unchanged(x, before)
    # the same file under another name (a hard link) is the same input
    os.link(x, folder / "alias.npy")
    assert main([*gram, "--out", str(folder / "alias.npy"), "--overwrite"]) == 2
    assert "is also --inputs" in capsys.readouterr().err and _unchanged(x, before)
    # a file of the user's: refused, then replaced when asked
    notes = folder / "notes.npy"
    notes.write_bytes(b"the user's notes")
    assert main([*gram, "--out", str(notes)]) == 2
    assert "exists and was not written by this command: pass --overwrite" in capsys.readouterr().err
    assert notes.read_bytes() == b"the user's notes"
    assert main([*gram, "--out", str(notes), "--overwrite"]) == 0
    assert np.load(notes).shape == (12, 12)
    kernel = ["kernel", "--infinite", "setting1", "--inputs", str(x), "--out", str(notes)]
    assert main(kernel) == 2 and np.load(notes).shape == (12, 12)
    # a folder that does not exist is said before any work
    assert main([*gram, "--out", str(folder / "missing" / "k.npy")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_bound_json_never_replaces_the_labels_or_a_users_file_but_its_own(folder, capsys):
    base = ["bound", "--theorem", "5.2", "--kernel", str(folder / "K.npy"), "--lam", "1", "--p", "0.1"]
    labels = folder / "y.npy"
    before = labels.read_bytes()
    assert main([*base, "--labels", str(labels), "--json", str(labels), "--overwrite"]) == 2
    assert "--json" in (err := capsys.readouterr().err) and "is also --labels" in err
    assert _unchanged(labels, before)
    assert main([*base, "--labels", str(labels), "--json", str(folder / "K.npy")]) == 2
    mine, theirs = folder / "terms.json", folder / "user.json"
    theirs.write_text('{"my": "settings"}')
    assert main([*base, "--labels", str(labels), "--json", str(theirs)]) == 2
    assert json.loads(theirs.read_text()) == {"my": "settings"}
    assert main([*base, "--labels", str(labels), "--json", str(mine)]) == 0
    assert main([*base, "--labels", str(labels), "--json", str(mine)]) == 0  # its own earlier output: replaced
    assert json.loads(mine.read_text())["theorem"] == "5.2"


def test_run_and_replay_refuse_a_users_file_before_any_work(folder, capsys, monkeypatch, shared_data):
    monkeypatch.setenv("NTK_CORE_DATA", str(shared_data))
    monkeypatch.setenv("NTK_CORE_CACHE", str(folder / "cache"))
    tiny = ["--set=n_train=20", "--set=n_test=20", "--set=width=16", "--set=steps=4", "--set=seeds=(0,)"]
    run = ["run", "difference_trick", "--profile", "quick", "--out", str(folder / "out"), *tiny, "--no-cache"]
    (folder / "out").mkdir()
    table = folder / "out" / "difference_trick-quick.csv"
    table.write_text("the user's table\n")
    assert main(run) == 2
    assert "exists and was not written by this command" in capsys.readouterr().err
    assert table.read_text() == "the user's table\n"
    table.unlink()
    assert main(run) == 0 and main(run) == 0  # its own earlier export (its .json names it): replaced
    assert main([*run, "--set=alphas=(0.5,)"]) == 0
    theirs = folder / "replay.json"
    theirs.write_text("[1, 2, 3]")
    assert main(["replay", "setting1", "--json", str(theirs)]) == 2
    assert "--json" in capsys.readouterr().err and theirs.read_text() == "[1, 2, 3]"


def test_the_check_refuses_what_it_should(tmp_path):
    out = tmp_path / "o.json"
    assert check_output_path(out, "--out") == out  # a new file in a folder that exists
    with pytest.raises(ValueError, match="is a folder"):
        check_output_path(tmp_path, "--out")
    out.write_text('{"experiment": "x", "arithmetic": {}, "checks": []}')
    with pytest.raises(ValueError, match="pass --overwrite"):
        check_output_path(out, "--json")
    made_here = json_written_with(("experiment", "arithmetic", "checks"))
    assert check_output_path(out, "--json", made_here=made_here) == out
    out.write_text("not JSON")
    with pytest.raises(ValueError, match="pass --overwrite"):
        check_output_path(out, "--json", made_here=made_here)
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        with pytest.raises(ValueError, match="cannot be written"):
            check_output_path(locked / "k.npy", "--out")
