"""The distributions, built once per session for every packaging test (a build takes a while)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from .support import NAME, NOT_SOURCES, ROOT, VERSION, run


@pytest.fixture(scope="session")
def dists(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(sdist, wheel), built like a release: the sdist from a clean copy of the tree, the wheel from the sdist."""
    try:
        import build  # noqa: F401  (only to fail with a useful message)
    except ImportError:
        pytest.fail("the `build` package is missing: install the dev extra (`make test` does)")
    tmp = tmp_path_factory.mktemp("dists")
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=NOT_SOURCES)  # the checkout stays untouched (no egg-info, no build/)
    out = tmp / "dist"
    run([sys.executable, "-m", "build", "--outdir", out, src], cwd=tmp)
    [sdist] = out.glob("*.tar.gz")
    [wheel] = out.glob("*.whl")
    assert sdist.name == f"{NAME}-{VERSION}.tar.gz"
    assert wheel.name == f"{NAME}-{VERSION}-py3-none-any.whl"
    return sdist, wheel
