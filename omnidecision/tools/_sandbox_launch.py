"""Sandbox launcher: runs (as the host's user) in the fresh child process, confines it, then execs the sandbox
interpreter on the model's code. Standard library only; started by tools/sandbox.py as

    python -I -S _sandbox_launch.py CONFIG_JSON

Steps: new network namespace (no interfaces up: no network, not even localhost), private mount namespace with
fresh tmpfs over /tmp, /var/tmp and /dev/shm (writes there vanish), resource limits, an unprivileged throwaway
uid/gid (so RLIMIT_NPROC is enforced and nothing root-owned is writable), no_new_privs, parent-death signal,
then exec with a minimal environment. The first stderr line reports which confinements took effect.
"""

import ctypes
import json
import os
import resource
import signal
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
MS_NOSUID = 2
MS_NODEV = 4
MS_BIND = 4096
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
MARKER = "\x00OMNIDECISION-SANDBOX "


def main() -> None:
    cfg = json.loads(sys.argv[1])
    libc = ctypes.CDLL(None, use_errno=True)
    status = {"network": "none", "user": "host", "mounts": "host"}
    scratch = cfg["scratch"]
    uid = cfg.get("uid")

    # Network: a new, empty network namespace.
    if libc.unshare(CLONE_NEWNET) == 0:
        status["network"] = "netns"
    elif uid is None and libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0:
        status["network"] = "userns+netns"
    else:
        status["network"] = "audit-hook"  # fallback: the bootstrap refuses socket use in-process

    os.chdir(scratch)
    if uid is not None and libc.unshare(CLONE_NEWNS) == 0:
        # Cover /tmp, /var/tmp, /dev/shm with fresh tmpfs, then bind the real scratch dir at /tmp/work.
        fd = os.open(scratch, os.O_RDONLY | os.O_DIRECTORY)
        ok = libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) == 0
        for target in (b"/tmp", b"/var/tmp", b"/dev/shm"):
            if ok and os.path.isdir(target):
                opts = b"size=%dk,mode=1777" % (cfg["fsize_kb"] * 2)
                ok = libc.mount(b"tmpfs", target, b"tmpfs", MS_NOSUID | MS_NODEV, opts) == 0
        if ok:
            os.mkdir("/tmp/work", 0o755)
            ok = libc.mount(f"/proc/self/fd/{fd}".encode(), b"/tmp/work", None, MS_BIND, None) == 0
        if ok:
            os.chdir("/tmp/work")
            status["mounts"] = "private-tmp"
        else:
            status["mounts"] = "failed (errno %d)" % ctypes.get_errno()
        os.close(fd)

    # Resource limits (inherited through exec and setuid).
    cpu = cfg["cpu_s"]
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    mem = cfg["memory_mb"] * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_FSIZE, (cfg["fsize_kb"] * 1024, cfg["fsize_kb"] * 1024))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (cfg["nofile"], cfg["nofile"]))
    resource.setrlimit(resource.RLIMIT_NPROC, (cfg["nproc"], cfg["nproc"]))

    # Identity: a throwaway unprivileged uid (root is exempt from RLIMIT_NPROC and may write anywhere).
    if uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        status["user"] = f"uid {uid}"
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    os.umask(0o077)

    sys.stderr.write(MARKER + json.dumps(status) + "\n")
    sys.stderr.flush()
    argv = [cfg["python"], "-I"] + ([] if cfg["site"] else ["-S"])
    if status["network"] == "audit-hook":
        argv += ["-c", BOOTSTRAP, "main.py"]
    else:
        argv += ["main.py"]
    os.execve(cfg["python"], argv, cfg["env"])


BOOTSTRAP = """
import sys, runpy
def _deny(event, args):
    if event.startswith("socket.") and event not in ("socket.gethostname",):
        raise PermissionError("network access is disabled in the sandbox")
sys.addaudithook(_deny)
sys.argv = sys.argv[1:] or ["main.py"]
runpy.run_path("main.py", run_name="__main__")
"""

if __name__ == "__main__":
    try:
        main()
    except Exception as exc:  # report, never run the code unconfined
        sys.stderr.write(f"sandbox setup failed: {type(exc).__name__}: {exc}\n")
        os._exit(125)
