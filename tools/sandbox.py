"""Start a Jupyter kernel that runs a student's submission in a sandbox (tools/grade.py).

What this tool keeps true
-------------------------
nbgrader runs a submission's code in an ordinary kernel, as the instructor: the code can
read, write and delete whatever the instructor can, loop forever or eat the memory
(nbgrader's documentation recommends grading in containers). ``tools/grade.py`` makes
every kernel it grades with start here instead, through a kernelspec whose ``argv`` is
this script; before it becomes the kernel (``exec`` of ``ipykernel_launcher``) it

* moves into a fresh temporary working directory (a copy of the submission's folder's
  other files) with its own ``HOME`` and ``TMPDIR``, under the grading run's root;
* limits its address space (``RLIMIT_AS``, so a runaway allocation is a ``MemoryError``),
  its CPU seconds (``RLIMIT_CPU``), the size of a file it writes, and core dumps;
* where the system has Landlock (Linux 5.13 and later, with the LSM enabled), forbids
  itself -- and everything it starts -- to change any file outside that directory, and
  (Landlock ABI 6) to signal processes outside its sandbox: deleting or overwriting a
  file elsewhere fails with ``PermissionError`` even by absolute path. Landlock needs no
  privileges; a kernel cannot undo it.

It writes its process id into the run's root first, so the grader can kill a submission
that runs past its time limit (``kill_kernels``). Where Landlock is missing the kernel
still runs with the limits and the temporary folders, and ``landlock_abi()`` returns 0, so
the grader can say that file isolation is missing (grade in a container there).

    python3 tools/sandbox.py --root DIR --memory MB --cpu SECONDS -- -f CONNECTION_FILE
"""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import shutil
import signal
import sys
import tempfile
from pathlib import Path

# Landlock's system calls (the same numbers on every architecture) and access rights.
CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION, RULE_PATH_BENEATH, PR_SET_NO_NEW_PRIVS = 1, 1, 38
WRITE_FILE, TRUNCATE = 1 << 1, 1 << 14
# Every right that changes the file system, by the ABI that introduced it: write, remove
# a directory or a file, make a character device, directory, file, socket, fifo, block
# device or symlink (ABI 1); link or rename across directories (2); truncate (3).
WRITE_RIGHTS = {1: sum(1 << bit for bit in (1, 4, 5, 6, 7, 8, 9, 10, 11, 12)),
                2: 1 << 13, 3: TRUNCATE}
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6
PID_SUFFIX = ".kernel-pid"
ROOT_VARIABLE = "HYBRIDLAB_SANDBOX_ROOT"  # the grader sets it per submission


class RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _syscall(*args: object) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    result = libc.syscall(*args)
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))
    return int(result)


def landlock_abi() -> int:
    """Landlock's ABI version on this system, 0 where it is missing or disabled."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        return _syscall(CREATE_RULESET, None, ctypes.c_size_t(0), CREATE_RULESET_VERSION)
    except OSError:
        return 0


def restrict_writes(writable: list[Path]) -> int:
    """Forbid this process and its children to change files outside ``writable`` (and,
    from ABI 6, to signal processes outside the sandbox); return the ABI used."""
    abi = landlock_abi()
    if abi < 1:
        return 0
    handled = sum(rights for version, rights in WRITE_RIGHTS.items() if version <= abi)
    attr = RulesetAttr(handled, 0, SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0)
    size = ctypes.sizeof(attr) if abi >= 6 else ctypes.sizeof(ctypes.c_uint64)
    ruleset = _syscall(CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    try:
        for path in writable:
            if not path.exists():
                continue
            allowed = handled if path.is_dir() else handled & (WRITE_FILE | TRUNCATE)
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = PathBeneathAttr(allowed, fd)
                _syscall(ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), 0)
            finally:
                os.close(fd)
        _no_new_privileges()  # required of an unprivileged process by restrict_self
        _syscall(RESTRICT_SELF, ruleset, 0)
    finally:
        os.close(ruleset)
    return abi


def _no_new_privileges() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


def prepare(root: Path, memory_mb: int, cpu_seconds: int) -> Path:
    """Everything before the kernel starts: the folders, the limits, Landlock."""
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{os.getpid()}{PID_SUFFIX}").write_text(str(os.getpid()))
    work = Path(tempfile.mkdtemp(prefix="submission-", dir=root))
    for item in Path.cwd().iterdir():  # the submission's data files, never the notebook
        if item.is_file() and item.suffix != ".ipynb":
            shutil.copy2(item, work / item.name)
    for name in ("home", "tmp"):
        (work / name).mkdir()
    os.environ.update(HOME=str(work / "home"), TMPDIR=str(work / "tmp"),
                      MPLCONFIGDIR=str(work / "home" / ".matplotlib"))
    os.chdir(work)
    limit = memory_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    restrict_writes([work, Path("/dev/null"), Path("/dev/shm")])
    return work


def kill_kernels(root: Path) -> list[int]:
    """Kill every kernel started under ``root`` (and what it started); return their ids."""
    killed = []
    for pid_file in root.glob(f"*{PID_SUFFIX}"):
        pid = int(pid_file.read_text())
        try:
            os.killpg(os.getpgid(pid), signal.SIGKILL)
            killed.append(pid)
        except (ProcessLookupError, PermissionError):
            pass
    return killed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, help=f"the run's folder (default: ${ROOT_VARIABLE})")
    parser.add_argument("--memory", type=int, default=4096, help="address space, MB")
    parser.add_argument("--cpu", type=int, default=600, help="CPU seconds")
    parser.add_argument("kernel_args", nargs=argparse.REMAINDER, help="-- ipykernel's arguments")
    args = parser.parse_args(argv)
    root = args.root or Path(os.environ.get(ROOT_VARIABLE) or tempfile.mkdtemp())
    prepare(root, args.memory, args.cpu)
    kernel_args = args.kernel_args[1:] if args.kernel_args[:1] == ["--"] else args.kernel_args
    os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", *kernel_args])
    return 1  # not reached: execv replaces this process


if __name__ == "__main__":
    sys.exit(main())
