"""The system-call filter: what it refuses inside the real sandbox, and what work still needs."""

from __future__ import annotations

import ctypes
import os
import shutil
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from whiz.environments import SandboxOptions, environment_for
from whiz.environments.seccomp import ARCHITECTURES, UnsupportedArchitecture, unix_socket_filter

IO_URING_SETUP = {"x86_64": 425, "aarch64": 425, "riscv64": 425}
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


@pytest.mark.parametrize("arch", sorted(ARCHITECTURES))
def test_each_architecture_gets_a_whole_program_that_checks_it(arch: str):
    program = unix_socket_filter(arch)
    assert program and len(program) % 8 == 0
    first = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, 16, 8)]
    # It starts by loading the architecture and comparing it with this one's.
    assert first[0] == (0x20, 0, 0, 4) and first[1][3] == ARCHITECTURES[arch].audit_arch


def test_an_unknown_architecture_is_refused():
    with pytest.raises(UnsupportedArchitecture, match="s390x"):
        unix_socket_filter("s390x")


def python(code: str) -> str:
    return f'python3 -c "{code}"'


@needs_bwrap
async def test_socketpairs_threads_and_subprocesses_still_work(tmp_path: Path):
    code = (
        "import socket, subprocess, threading, asyncio, multiprocessing; "
        "a, b = socket.socketpair(); a.send(b'x'); assert b.recv(1) == b'x'; "
        "t = threading.Thread(target=print); t.start(); t.join(); "
        "subprocess.run(['true'], check=True); asyncio.run(asyncio.sleep(0)); "
        "q = multiprocessing.Queue(); q.put(1); assert q.get() == 1; print('all-ok')"
    )
    result = await environment_for(tmp_path).run(python(code))
    assert result.ok and "all-ok" in result.output, result.output


@needs_bwrap
async def test_tcp_to_loopback_works_in_a_network_sandbox_while_unix_sockets_stay_refused(tmp_path: Path):
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    got: list[bytes] = []

    def accept() -> None:
        conn, _ = server.accept()
        with conn:
            got.append(conn.recv(10))

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    code = (
        f"import socket; socket.create_connection(('127.0.0.1', {port}), 5).send(b'tcp'); "
        "socket.socket(socket.AF_UNIX)"
    )
    result = await environment_for(tmp_path, SandboxOptions(network=True)).run(python(code))
    thread.join(5)
    server.close()
    assert got == [b"tcp"]
    assert not result.ok and "Operation not permitted" in result.output


def _io_uring_works_here() -> bool:
    nr = IO_URING_SETUP.get(os.uname().machine)
    if nr is None:
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    params = ctypes.create_string_buffer(120)
    fd = libc.syscall(nr, 4, params)
    if fd >= 0:
        os.close(fd)
    return fd >= 0


@needs_bwrap
@pytest.mark.skipif(not _io_uring_works_here(), reason="io_uring is off on this machine")
async def test_io_uring_is_unavailable_inside(tmp_path: Path):
    # io_uring can open and connect sockets without the system calls the filter checks.
    nr = IO_URING_SETUP[os.uname().machine]
    code = (
        "import ctypes; libc = ctypes.CDLL(None, use_errno=True); "
        f"fd = libc.syscall({nr}, 4, ctypes.create_string_buffer(120)); "
        "print('io_uring', fd, ctypes.get_errno())"
    )
    result = await environment_for(tmp_path).run(python(code))
    assert "io_uring -1 38" in result.output, result.output  # ENOSYS: as on a kernel without it


@needs_bwrap
async def test_a_new_user_namespace_is_refused(tmp_path: Path):
    # Inside one, a command would hold every capability again.
    result = await environment_for(tmp_path).run("unshare -r id -u || echo REFUSED")
    assert "REFUSED" in result.output, result.output


# x86_64 machine code: the i386 system call `socket(AF_UNIX, SOCK_STREAM, 0)` (number 359 there,
# 41 here) through `int 0x80`, which a 64-bit process may use: rbx saved, eax returned.
I386_UNIX_SOCKET = "53B867010000BB01000000B90100000031D2CD805BC3"
CALL_I386 = f"""
import ctypes, mmap
page = mmap.mmap(-1, 4096, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
                 prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(bytes.fromhex("{I386_UNIX_SOCKET}"))
print("i386-socket", ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))())
"""


def _i386_calls_work_here(tmp_path: Path) -> bool:
    if os.uname().machine != "x86_64":
        return False
    script = tmp_path / "i386.py"
    script.write_text(CALL_I386)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=30)
    return done.returncode == 0 and "i386-socket -" not in done.stdout


@needs_bwrap
async def test_the_i386_system_calls_of_an_x86_64_machine_are_refused(tmp_path: Path):
    # Under another ABI the same call has another number: a filter that checked only numbers
    # would let this unix socket through.
    if not _i386_calls_work_here(tmp_path):
        pytest.skip("no i386 emulation on this machine")
    result = await environment_for(tmp_path).run("python3 i386.py")
    assert "i386-socket -38" in result.output, result.output  # ENOSYS
