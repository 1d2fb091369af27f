"""The local two-node SLURM cluster as a test component: `scripts/slurm/local-cluster.sh` brought up once per
session in a scratch folder (own ports, own munge key), torn down after, and a small client for the tests.

    make slurm-test        # brings the cluster up from nothing, runs tests/slurm, leaves no daemon behind
    OD_SLURM_RESULTS=docs/results/slurm-local.json make slurm-test   # also writes what the tests measured

Without slurm-wlm and munge, or not as root (the daemons' user), the tests skip on a developer's machine and fail
under CI=true (the project's skip policy, tests/conftest.py), as the browser tests do.
"""

from __future__ import annotations

import getpass
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.slurm.figures import RESULTS, write_page

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "scripts" / "slurm" / "local-cluster.sh"
VENV_BIN = ROOT / ".venv" / "bin"
# job states after which a job never runs again (without a requeue)
FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE",
         "PREEMPTED"}
NEVER_STARTS = {"PartitionConfig", "BadConstraints", "PartitionNodeLimit", "ReqNodeNotAvail"}


def free_port_block(n: int = 4) -> int:
    """The first of n consecutive free TCP ports on 127.0.0.1."""
    for base in range(17100, 30000, 10):
        socks = []
        try:
            for p in range(base, base + n):
                s = socket.socket()
                s.bind(("127.0.0.1", p))
                socks.append(s)
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free block of ports")


@dataclass
class Cluster:
    """A running local cluster: its folder, the environment its clients need, and the calls the tests make."""

    dir: Path
    env: dict[str, str] = field(default_factory=dict)

    def run(self, *cmd: str, check: bool = True, cwd: Path = ROOT,
            timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(list(cmd), cwd=cwd, env=self.env, capture_output=True, text=True, check=check,
                              timeout=timeout)

    def sbatch(self, *args: str, cwd: Path = ROOT) -> str:
        """Submit; the job id (an array's job id for an array)."""
        out = self.run("sbatch", "--parsable", *args, cwd=cwd)
        return out.stdout.strip().split(";")[0]

    def jobs(self, job_id: str) -> list[dict[str, str]]:
        """Every record of a job (one per array task), as `scontrol -o show job` prints them."""
        out = self.run("scontrol", "-o", "show", "job", job_id, check=False)
        return [dict(re.findall(r"(\w+)=(\S*)", line)) for line in out.stdout.splitlines() if line.strip()]

    def states(self, job_id: str) -> list[str]:
        return [j.get("JobState", "?") for j in self.jobs(job_id)]

    def wait(self, job_id: str, timeout: float = 600, until: set[str] = FINAL) -> list[dict[str, str]]:
        """Wait until every record of the job is in one of `until`; its records."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            jobs = self.jobs(job_id)
            if jobs and all(j.get("JobState") in until for j in jobs):
                return jobs
            # a request the partition can never hold stays PENDING forever: say so at once
            stuck = [j for j in jobs if j.get("JobState") == "PENDING" and j.get("Reason") in NEVER_STARTS]
            assert not stuck, f"job {job_id} can never start: {stuck}"
            time.sleep(1)
        raise TimeoutError(f"job {job_id} not in {sorted(until)} after {timeout} s: {self.jobs(job_id)}")

    def wait_running(self, job_id: str, timeout: float = 300) -> dict[str, str]:
        return self.wait(job_id, timeout, until={"RUNNING"} | FINAL)[0]

    def requeue(self, job_id: str) -> None:
        self.run("scontrol", "requeue", job_id)


def _can_run() -> str | None:
    if os.geteuid() != 0:
        return "the local SLURM cluster runs its daemons as root (slurmd launches jobs as their user)"
    if not (shutil.which("sbatch") or Path("/usr/sbin/slurmctld").exists()) and not shutil.which("apt-get"):
        return "slurm-wlm is not installed and apt-get is not there to install it"
    return None


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory) -> Iterator[Cluster]:
    """A two-node cluster (n1, n2 on 127.0.0.1, the machine's CPUs each), up for the session."""
    if (reason := _can_run()) is not None:
        pytest.skip(reason)
    # a short folder name: slurmd's socket paths are limited to ~100 characters
    folder = Path(os.environ.get("OD_SLURM_TEST_DIR") or tmp_path_factory.mktemp("slurm"))
    env = dict(os.environ, OD_SLURM_DIR=str(folder), OD_SLURM_PORT=str(free_port_block()),
               OD_SLURM_KILL_WAIT=os.environ.get("OD_SLURM_KILL_WAIT", "20"),
               SLURM_CONF=str(folder / "slurm.conf"), PATH=f"{VENV_BIN}:{os.environ['PATH']}:/usr/sbin")
    up = subprocess.run(["bash", str(CLUSTER), "up"], env=env, capture_output=True, text=True, timeout=600)
    if up.returncode != 0:
        subprocess.run(["bash", str(CLUSTER), "down"], env=env, capture_output=True, timeout=120)
        pytest.fail(f"the local SLURM cluster did not start:\n{up.stdout}\n{up.stderr}")
    cluster = Cluster(folder, env)
    try:
        yield cluster
    finally:
        cluster.run("scancel", "--user", getpass.getuser(), check=False)
        down = subprocess.run(["bash", str(CLUSTER), "down"], env=env, capture_output=True, text=True, timeout=120)
        assert down.returncode == 0, down.stderr


@pytest.fixture(scope="session")
def slurm_results() -> Iterator[dict]:
    """What the SLURM tests measure (wall times beside the same step without SLURM, steps lost per preemption,
    records doubled or lost), written to $OD_SLURM_RESULTS at the end of the session when it is set (the figures of
    docs/cluster/local-cluster.md come from that file)."""
    results: dict = {}
    yield results
    if path := os.environ.get("OD_SLURM_RESULTS"):
        cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name")), platform.processor())
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        record = {"command": "OD_SLURM_RESULTS=docs/results/slurm-local.json make slurm-test",
                  "machine": {"cpu": cpu, "cores": os.cpu_count()}, "git_revision": rev.stdout.strip(),
                  "date": time.strftime("%Y-%m-%d"), "results": results}
        Path(path).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        if Path(path).resolve() == RESULTS.resolve():  # the page's figures, rendered from the file just written
            write_page()
