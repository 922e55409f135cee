"""The system-call filter a confined command runs under: no path to the host's unix sockets.

A read-only mount does not stop `connect()` to a unix socket (the kernel checks the socket file's
permission, not the mount), and a new network namespace isolates only abstract sockets. So a
confined command could reach any socket server whose file it can see: the user's systemd bus
(`systemd-run --user` runs an unconfined command), `docker.sock`, the ssh and gpg agents. Hiding
`/run` helps, but a socket can live anywhere. The filter refuses what reaches one:

- `socket(AF_UNIX, ...)`: no new unix socket, so no `connect()` to a path. `socketpair()` stays
  allowed (asyncio, pipes between a test runner and its workers), except `SOCK_DGRAM` pairs: a
  datagram socket may `sendto()` any path, connected or not.
- `io_uring_*`: io_uring can create and connect sockets without those system calls (ENOSYS, so
  programs fall back to plain calls, as on kernels without io_uring).
- A new user namespace (`unshare`/`clone` with `CLONE_NEWUSER`; `clone3`, whose flags a filter
  cannot read, answers ENOSYS so libc falls back to `clone`): inside one a command holds every
  capability again, over what the sandbox mounted.
- The kernel keyrings (`keyctl`, `add_key`, `request_key`): as root the command's user is still
  root's outside the box (without capabilities), and would share root's keyring.
- Another ABI than the machine's own: i386 system calls on x86_64 (other numbers, `socketcall`)
  and the x32 ABI (numbers with bit 30 set) would pass the checks above under other numbers.

Hand-written classic BPF rather than a binding (libseccomp's `seccomp` module is not on PyPI, and
`pyseccomp` needs the C library installed): the program is a dozen checks, built once, read by
bubblewrap from a descriptor (`--seccomp FD`), and `tests/environments/test_seccomp.py` runs it.
Codex's Linux sandbox (seccompiler) and Claude Code's sandbox runtime (a pre-built filter) do the
same kind of thing; see docs/sandbox.md for where whiz's choices differ.
"""

from __future__ import annotations

import errno
import platform
import socket
import struct
from dataclasses import dataclass

# Classic BPF opcodes (linux/bpf_common.h) and seccomp return values (linux/seccomp.h).
LD_W_ABS = 0x20  # A = the 32-bit word at offset k of struct seccomp_data
ALU_AND_K = 0x54  # A &= k
JEQ_K = 0x15  # jump if A == k
JGE_K = 0x35  # jump if A >= k
JSET_K = 0x45  # jump if A & k
RET_K = 0x06  # return k
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000

# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6]. The low half of an
# argument is at its offset on the little-endian machines supported here.
NR_OFFSET = 0
ARCH_OFFSET = 4


def arg_offset(index: int) -> int:
    return 16 + 8 * index


X32_SYSCALL_BIT = 0x40000000
CLONE_NEWUSER = 0x10000000
SOCK_TYPE_MASK = 0xF


@dataclass(frozen=True)
class Syscalls:
    """One architecture's audit id and the numbers of the system calls the filter looks at."""

    audit_arch: int
    socket: int
    socketpair: int
    unshare: int
    clone: int
    clone3: int
    io_uring: tuple[int, int, int]  # setup, enter, register
    keyrings: tuple[int, int, int]  # add_key, request_key, keyctl
    x32_bit: bool = False
    """x86_64 also takes x32 system calls under the same audit id, with bit 30 set."""


# asm-generic numbers, shared by aarch64 and riscv64.
_GENERIC = dict(socket=198, socketpair=199, unshare=97, clone=220, clone3=435)
ARCHITECTURES = {
    "x86_64": Syscalls(
        0xC000003E, socket=41, socketpair=53, unshare=272, clone=56, clone3=435,
        io_uring=(425, 426, 427), keyrings=(248, 249, 250), x32_bit=True,
    ),
    "aarch64": Syscalls(0xC00000B7, io_uring=(425, 426, 427), keyrings=(217, 218, 219), **_GENERIC),
    "riscv64": Syscalls(0xC00000F3, io_uring=(425, 426, 427), keyrings=(217, 218, 219), **_GENERIC),
}  # fmt: skip


class UnsupportedArchitecture(ValueError):
    """No filter is known for this machine's architecture."""


def machine() -> str:
    """This machine's architecture, as `ARCHITECTURES` names it."""
    name = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(name, name)


def unix_socket_filter(arch: str | None = None) -> bytes:
    """The compiled filter (an array of `struct sock_filter`, as `bwrap --seccomp` reads it) for
    `arch` (default: this machine's); `UnsupportedArchitecture` for one not in `ARCHITECTURES`."""
    arch = arch or machine()
    calls = ARCHITECTURES.get(arch)
    if calls is None:
        known = ", ".join(ARCHITECTURES)
        raise UnsupportedArchitecture(f"no system-call filter for {arch} (only {known})")
    return _Program(calls).assemble()


class _Program:
    """Builds the filter: a list of instructions whose jumps name labels, resolved at the end."""

    def __init__(self, calls: Syscalls):
        self.calls = calls
        self.code: list[tuple[int, str | int, str | int, int]] = []
        self.labels: dict[str, int] = {}

    def op(self, code: int, k: int, jt: str | int = 0, jf: str | int = 0) -> None:
        self.code.append((code, jt, jf, k))

    def label(self, name: str) -> None:
        self.labels[name] = len(self.code)

    def assemble(self) -> bytes:
        c = self.calls
        self.op(LD_W_ABS, ARCH_OFFSET)
        self.op(JEQ_K, c.audit_arch, jf="no_such_call")
        self.op(LD_W_ABS, NR_OFFSET)
        if c.x32_bit:
            self.op(JGE_K, X32_SYSCALL_BIT, jt="no_such_call")
        self.op(JEQ_K, c.socket, jt="socket")
        self.op(JEQ_K, c.socketpair, jt="socketpair")
        self.op(JEQ_K, c.unshare, jt="new_user_namespace")
        self.op(JEQ_K, c.clone, jt="new_user_namespace")
        for nr in (c.clone3, *c.io_uring):
            self.op(JEQ_K, nr, jt="no_such_call")
        for nr in c.keyrings:
            self.op(JEQ_K, nr, jt="refuse")
        self.op(RET_K, RET_ALLOW)
        self.label("socket")
        self.op(LD_W_ABS, arg_offset(0))
        self.op(JEQ_K, socket.AF_UNIX, jt="refuse")
        self.op(RET_K, RET_ALLOW)
        self.label("socketpair")
        self.op(LD_W_ABS, arg_offset(1))
        self.op(ALU_AND_K, SOCK_TYPE_MASK)
        self.op(JEQ_K, socket.SOCK_DGRAM, jt="refuse")
        self.op(RET_K, RET_ALLOW)
        self.label("new_user_namespace")  # unshare(flags) and clone(flags, ...): flags come first
        self.op(LD_W_ABS, arg_offset(0))
        self.op(JSET_K, CLONE_NEWUSER, jt="refuse")
        self.op(RET_K, RET_ALLOW)
        self.label("refuse")
        self.op(RET_K, RET_ERRNO | errno.EPERM)
        self.label("no_such_call")
        self.op(RET_K, RET_ERRNO | errno.ENOSYS)
        return b"".join(self._encode(i, ins) for i, ins in enumerate(self.code))

    def _encode(self, index: int, ins: tuple[int, str | int, str | int, int]) -> bytes:
        code, jt, jf, k = ins
        # A jump counts the instructions it skips: from the one after it to its target.
        offsets = [self.labels[j] - index - 1 if isinstance(j, str) else j for j in (jt, jf)]
        assert all(0 <= o <= 255 for o in offsets), "a BPF jump reaches 255 instructions at most"
        return struct.pack("=HBBI", code, offsets[0], offsets[1], k)
