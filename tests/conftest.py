"""Shared fixtures. Tests never touch the network: they use the embedded MNIST subset,
files they make themselves, or the official files in ``$NTK_CORE_DATA`` (``../shared/data`` on CI)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# the replay of the medium records (tests/support/replay_plan.py): its processes start with the session
pytest_plugins = ["replay_plan"]

# The seed that draws which unit of each class the replay of the medium records runs (tests/test_recorded.py):
# drawn once per session unless given, and printed in the session's header, so that a failing replay can be rerun.
os.environ.setdefault("NTK_REPLAY_SEED", str(random.SystemRandom().randrange(2**31)))


def pytest_report_header(config: pytest.Config) -> str:
    return f"replay of the medium records: NTK_REPLAY_SEED={os.environ['NTK_REPLAY_SEED']}"


def _shared_data_dir() -> Path | None:
    env = os.environ.get("NTK_CORE_DATA")
    for candidate in ([Path(env)] if env else []) + [REPO.parent / "shared" / "data"]:
        if (candidate / "mnist").is_dir():
            return candidate
    return None


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The folder with the official MNIST files and the partial CIFAR-10 (skips if absent)."""
    path = _shared_data_dir()
    if path is None:
        pytest.skip("no data folder: set NTK_CORE_DATA to a folder with mnist/ and cifar10/ (as on CI)")
    return path


@pytest.fixture
def empty_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty data directory, also set as $NTK_CORE_DATA so that nothing else is found."""
    folder = tmp_path / "data"
    folder.mkdir()
    monkeypatch.setenv("NTK_CORE_DATA", str(folder))
    return folder


@pytest.fixture(autouse=True)
def _fresh_ntk_choices():
    """Every test starts with no method kept by ``empirical_ntk(..., method="auto")`` (``ntk_core.ntk.choices``):
    a test that forces another choice (a memory budget, a patched estimate) is not answered by another test's."""
    from ntk_core.ntk import forget_choices

    forget_choices()
    yield
