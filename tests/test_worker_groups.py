"""`make test` runs on every core (pytest-xdist, `-n auto --dist loadscope`) with the scopes tests/conftest.py gives:
the tests of one folder on one worker, and every test file that takes the shared vLLM server on one worker. Checked
in a pytest subprocess with two workers that runs this repository's conftest.py over a small tree of folders whose
tests write down the worker that ran them (a `vllm.py` placed first on the path stands in for the package the
server's tests require).

    pytest -q tests/test_worker_groups.py
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CONFTEST = Path(__file__).resolve().with_name("conftest.py")

PLAIN = '''
import os
from pathlib import Path

import pytest

@pytest.mark.parametrize("i", range(4))
def test_plain(i):
    here = Path(__file__)
    (Path(os.environ["WORKER_LOG"]) / f"{here.parent.name}-{here.stem}-{i}").write_text(
        os.environ.get("PYTEST_XDIST_WORKER", "main"))
'''

SERVED = '''
import os
from pathlib import Path

import pytest

@pytest.fixture
def vllm_server():  # stands in for the session server of tests/conftest.py
    return None

@pytest.mark.parametrize("i", range(3))
def test_served(i, vllm_server):
    here = Path(__file__)
    (Path(os.environ["WORKER_LOG"]) / f"vllm-{here.parent.name}-{i}").write_text(
        os.environ.get("PYTEST_XDIST_WORKER", "main"))
'''


def test_a_folder_and_the_servers_tests_each_run_on_one_worker(tmp_path: Path) -> None:
    tree, log = tmp_path / "tree", tmp_path / "log"
    files = {"conftest.py": CONFTEST.read_text("utf-8"), "vllm.py": "",
             "pytest.ini": "[pytest]\nmarkers =\n    vllm: the server's tests\n"}
    for folder in ("alpha", "beta"):
        files |= {f"{folder}/test_{folder}_one.py": PLAIN, f"{folder}/test_{folder}_two.py": PLAIN,
                  f"{folder}/test_{folder}_served.py": SERVED}
    for name, text in files.items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text(text, "utf-8")
    log.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    env |= {"PYTHONPATH": str(tree), "WORKER_LOG": str(log)}  # the stand-in vllm.py: what requires("vllm") imports
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                          "--dist", "loadscope", "."], cwd=tree, env=env, capture_output=True, text=True, timeout=300)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    ran = {p.name: p.read_text() for p in log.iterdir()}
    assert len(ran) == 2 * (4 + 4 + 3), (sorted(ran), out)
    workers: dict[str, set[str]] = {}
    for name, worker in ran.items():
        workers.setdefault(name.split("-")[0], set()).add(worker)
    assert set(workers) == {"vllm", "alpha", "beta"}, workers
    assert all(len(w) == 1 and w != {"main"} for w in workers.values()), workers
