"""Sandbox launcher: standard library only. tools/sandbox.py passes this file's text to an interpreter the caller can
execute (so no file of the project needs to be readable by the sandbox user):

    python -I -S -c "$(cat omnidecision/tools/_sandbox_launch.py)" CONFIG_JSON

Steps, in order; if one fails the launcher exits 125 with the reason and the code never runs unconfined:
1. resource limits (CPU, address space, file size, open files, processes, no core dumps);
2. as root: drop to the run's throwaway uid/gid (the caller's uid otherwise); no_new_privs; parent-death signal;
3. the filesystem, network, pid, ipc and uts namespaces, by one of two methods:
   - "bubblewrap": exec `bwrap` (the maintained tool) with the layout below;
   - "namespaces": the same layout built here with unshare(2)/mount(2)/pivot_root(2) (a user namespace when not
     root), a small init as pid 1 that reaps and exits with the program;
4. inside: INNER re-applies the process limit in the new user namespace, writes the report line (the marker) to
   stderr and execs the program. The marker proves the confinement was in place before any model code ran.

Layout: a read-only root holding /usr (+ the /bin, /lib... links), /etc/ld.so.cache, the interpreter's prefix (and
the venv when site-packages are enabled), a fresh /proc, a minimal /dev, size-capped private tmpfs on /tmp and
/dev/shm, and the scratch dir (the only host path that is writable) at /tmp/work. No network interface. Nothing of
the user's home, the project or other folders is visible.
"""

import ctypes
import json
import os
import platform
import resource
import signal
import sys

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE, MS_RELATIME = (
    1024, 2048, 4096, 8192, 0x4000, 1 << 18, 1 << 21
)
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}
TOP_LEVEL = ("bin", "sbin", "lib", "lib64", "lib32", "libx32")
DEVICES = ("null", "zero", "full", "random", "urandom")
WORK = "/tmp/work"

# Runs inside the sandbox as the final user: re-caps processes (counted per user namespace on Linux >= 5.14), reports,
# then execs the program. Arguments: report JSON, interpreter, site flag, process cap (0: keep the inherited one).
INNER = r"""
import json, os, resource, sys
report, python, site, nproc = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3] == "1", int(sys.argv[4])
if nproc:
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
report["user"] = report["user"].replace("UID", str(os.getuid()))
sys.stderr.write("\x00OMNIDECISION-SANDBOX " + json.dumps(report) + "\n")
sys.stderr.flush()
os.execv(python, [python, "-I"] + ([] if site else ["-S"]) + ["main.py"])
"""


class SetupError(Exception):
    """A confinement step failed: the code must not run."""


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    return libc


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(err)} (errno {err})")


def _mount(libc, src, target, fstype, flags, data=None) -> None:  # type: ignore[no-untyped-def]
    enc = [None if v is None else str(v).encode() for v in (src, target, fstype, data)]
    _check(libc.mount(enc[0], enc[1], enc[2], flags, enc[3]), f"mount {src} on {target}")


def _remount_ro(libc, target: str) -> None:  # type: ignore[no-untyped-def]
    """Read-only remount of a bind mount, keeping the flags the kernel locks in a user namespace."""
    keep = 0
    st = os.statvfs(target).f_flag
    for st_flag, ms_flag in ((2, MS_NOSUID), (4, MS_NODEV), (8, MS_NOEXEC), (1024, MS_NOATIME),
                             (2048, MS_NODIRATIME), (4096, MS_RELATIME)):  # fmt: skip
        if st & st_flag:
            keep |= ms_flag
    _mount(libc, None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | keep)


def _bind(libc, src: str, dest: str, rw: bool = False) -> None:  # type: ignore[no-untyped-def]
    if os.path.isdir(src):
        os.makedirs(dest, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        open(dest, "a").close()
    _mount(libc, src, dest, None, MS_BIND | MS_REC)
    if not rw:
        _remount_ro(libc, dest)


def _limits(cfg: dict, nproc: int) -> None:
    lim = cfg["limits"]
    resource.setrlimit(resource.RLIMIT_CPU, (lim["cpu_s"], lim["cpu_s"] + 1))
    mem = lim["memory_mb"] * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_FSIZE, (lim["fsize_kb"] * 1024, lim["fsize_kb"] * 1024))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (lim["nofile"], lim["nofile"]))
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


def _nproc_inside(cfg: dict, overhead: int) -> int:
    """The program's process cap as counted inside its namespaces (0: keep the one set outside). Linux >= 5.14
    counts processes per user namespace, so the cap holds the program's own; older kernels count every process
    of the uid, where only the throwaway uid (no other process) can take the tight cap."""
    release = tuple(int(x) for x in (platform.release().split("-")[0].split(".") + ["0"])[:2] if x.isdigit())
    if cfg["uid"] is None and release < (5, 14):
        return 0
    return cfg["limits"]["nproc"] + overhead


def _drop_to(uid: int) -> None:
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)


def _seal(libc) -> None:  # type: ignore[no-untyped-def]
    """no_new_privs and SIGKILL when the parent dies (set after any uid change, which clears it)."""
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
    _check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PDEATHSIG)")


def _inner_argv(cfg: dict, report: dict, inner_python: str, nproc_inside: int) -> list[str]:
    return [inner_python, "-I", "-S", "-c", INNER, json.dumps(report), cfg["python"], "1" if cfg["site"] else "0",
            str(nproc_inside)]  # fmt: skip


def bwrap_argv(cfg: dict) -> list[str]:
    """The bubblewrap command line for the layout in the module docstring."""
    tmp = str(cfg["tmp_kb"] * 1024)
    argv = [cfg["bwrap"], "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session", "--clearenv",
            "--hostname", "sandbox", "--ro-bind", "/usr", "/usr"]  # fmt: skip
    if cfg.get("bwrap_disable_userns"):
        argv.append("--disable-userns")
    for name in TOP_LEVEL:
        path = "/" + name
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    argv += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    for path in cfg["ro_binds"]:
        argv += ["--ro-bind", path, path]
    argv += ["--proc", "/proc", "--dev", "/dev", "--size", tmp, "--tmpfs", "/dev/shm", "--size", tmp,
             "--tmpfs", "/tmp", "--bind", cfg["scratch"], WORK, "--chdir", WORK, "--remount-ro", "/"]  # fmt: skip
    for key, value in cfg["env"].items():
        argv += ["--setenv", key, value]
    return argv + ["--"]


def _pivot_root(libc, new_root: str) -> None:  # type: ignore[no-untyped-def]
    os.chdir(new_root)
    os.mkdir("oldroot")
    nr = SYS_PIVOT_ROOT.get(platform.machine())
    if nr is not None:
        _check(libc.syscall(nr, b".", b"oldroot"), "pivot_root")
        os.chdir("/")
        _check(libc.umount2(b"/oldroot", MNT_DETACH), "umount old root")
        os.rmdir("/oldroot")
    else:  # switch_root's way: move the new root over / and chroot into it
        os.rmdir("oldroot")
        _mount(libc, ".", "/", None, MS_MOVE)
        os.chroot(".")
        os.chdir("/")


def _build_root(libc, cfg: dict, scratch_fd: int) -> str:  # type: ignore[no-untyped-def]
    """Pid 1 of the new namespaces: mount the layout on a fresh tmpfs and pivot into it. Returns the /proc mode."""
    tmp_opts = "size=%dk,mode=1777" % cfg["tmp_kb"]
    _mount(libc, "none", "/", None, MS_REC | MS_PRIVATE)
    root = "/tmp"  # a fresh tmpfs over the host's /tmp (the scratch dir is held open as scratch_fd)
    _mount(libc, "tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1024k,mode=0755")
    _bind(libc, "/usr", root + "/usr")
    for name in TOP_LEVEL:
        path = "/" + name
        if os.path.islink(path):
            os.symlink(os.readlink(path), root + path)
        elif os.path.isdir(path):
            _bind(libc, path, root + path)
    if os.path.isfile("/etc/ld.so.cache"):
        _bind(libc, "/etc/ld.so.cache", root + "/etc/ld.so.cache")
    for path in cfg["ro_binds"]:
        _bind(libc, path, root + path)
    os.makedirs(root + "/dev")
    _mount(libc, "tmpfs", root + "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=0755")
    for name in DEVICES:
        _bind(libc, "/dev/" + name, root + "/dev/" + name, rw=True)
    for i, name in enumerate(("stdin", "stdout", "stderr")):
        os.symlink(f"/proc/self/fd/{i}", root + "/dev/" + name)
    os.symlink("/proc/self/fd", root + "/dev/fd")
    os.makedirs(root + "/dev/shm")
    _mount(libc, "tmpfs", root + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, tmp_opts)
    os.makedirs(root + "/proc")
    try:  # a /proc of the new pid namespace; none rather than the host's where the kernel refuses it
        _mount(libc, "proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        proc = "private"
    except SetupError:
        proc = "none"
    os.makedirs(root + "/tmp")
    _mount(libc, "tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, tmp_opts)
    os.makedirs(root + WORK)
    _mount(libc, f"/proc/self/fd/{scratch_fd}", root + WORK, None, MS_BIND)
    _pivot_root(libc, root)
    _remount_ro(libc, "/dev")
    _remount_ro(libc, "/")
    os.chdir(WORK)
    return proc


def _exit_like(status: int) -> None:
    os._exit(128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))


def run_namespaces(cfg: dict, libc, report: dict) -> None:  # type: ignore[no-untyped-def]
    """Build the sandbox with the kernel's namespaces directly; the launcher stays as the waiting parent."""
    root = os.geteuid() == 0
    uid, gid = os.getuid(), os.getgid()
    os.umask(0o022)  # the layout's folders must be traversable by the program's uid
    flags = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | (0 if root else CLONE_NEWUSER)
    if libc.unshare(flags) != 0:
        err = ctypes.get_errno()
        raise SetupError(
            f"cannot create {'mount/network/pid' if root else 'unprivileged user'} namespaces "
            f"(unshare: {os.strerror(err)}) and bubblewrap (bwrap) is not installed: install bubblewrap "
            "(apt-get install bubblewrap) or enable unprivileged user namespaces (sysctl user.max_user_namespaces, "
            "kernel.unprivileged_userns_clone)"
        )
    if not root:
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as fh:
                fh.write(text)
    init = os.fork()
    if init:  # the launcher: wait for pid 1 of the sandbox, exit like it
        _exit_like(os.waitpid(init, 0)[1])
    try:  # pid 1 inside; the scratch dir is opened in the new mount namespace (a bind source must live there)
        scratch_fd = os.open(cfg["scratch"], os.O_RDONLY | os.O_DIRECTORY)
        report["proc"] = _build_root(libc, cfg, scratch_fd)
        os.close(scratch_fd)
        libc.sethostname(b"sandbox", 7)
        if cfg["uid"] is not None:
            _drop_to(cfg["uid"])
        _check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PDEATHSIG)")
        # processes counted with the program's: pid 1 (+ this launcher, in the same user namespace when not root)
        inner = _inner_argv(cfg, report, cfg["python"], _nproc_inside(cfg, 1 if root else 2))
    except (SetupError, OSError) as exc:
        sys.stderr.write(f"sandbox setup failed: {exc}\n")
        os._exit(125)
    program = os.fork()
    if program == 0:
        try:
            os.setsid()
            _seal(libc)
            os.umask(0o077)
            os.execve(inner[0], inner, cfg["env"])
        except OSError as exc:
            sys.stderr.write(f"sandbox setup failed: exec {inner[0]}: {exc}\n")
        os._exit(125)
    while True:  # init: reap orphans until the program itself exits (then the kernel kills the rest)
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(125)
        if pid == program:
            _exit_like(status)


def main() -> None:
    cfg = json.loads(sys.argv[1])
    libc = _libc()
    uid = cfg["uid"]
    report = {
        "method": cfg["method_label"],
        "filesystem": " + ".join(["minimal read-only root (/usr)", *cfg["ro_binds"]]),
        "writable": "scratch (/tmp/work), private /tmp and /dev/shm",
        "python": cfg["python"],
        "network": "none",
        "pid": "private",
        "proc": "private",
        "user": "uid UID (throwaway)" if uid is not None else "uid UID (caller)",
        "environment": "cleared: " + " ".join(sorted(cfg["env"])),
    }
    # 1. limits; the process cap is per uid: the throwaway uid has no other process, the caller may have many
    _limits(cfg, cfg["nproc_outside"])
    if cfg["method"] == "bubblewrap":
        # 2. identity, then 3. exec bubblewrap (it becomes this process; the host kills its process group)
        if uid is not None:
            _drop_to(uid)
        _seal(libc)
        os.umask(0o077)
        inner = _inner_argv(cfg, report, cfg["python"], _nproc_inside(cfg, 1))  # + bwrap's pid 1
        argv = bwrap_argv(cfg) + inner
        os.execve(argv[0], argv, {"PATH": "/usr/bin:/bin"})
    run_namespaces(cfg, libc, report)


if __name__ == "__main__":
    try:
        main()
    except (SetupError, OSError) as exc:  # report, never run the code unconfined
        sys.stderr.write(f"sandbox setup failed: {type(exc).__name__}: {exc}\n")
        os._exit(125)
