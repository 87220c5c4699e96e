"""roles/dask/files/wait_ports.py: a ucx:// port waits out TIME_WAIT, a tcp:// one only a listener (real sockets)."""
from __future__ import annotations

import runpy
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

WAIT = runpy.run_path(str(Path(__file__).resolve().parents[2] / "roles" / "dask" / "files" / "wait_ports.py"))


@pytest.fixture
def listener() -> Iterator[tuple[socket.socket, int]]:
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Tornado's listeners do
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield server, server.getsockname()[1]
    server.close()


def time_wait(server: socket.socket, port: int) -> None:
    """A connection the server side closes first: its socket stays in TIME_WAIT on `port`."""
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = server.accept()
    accepted.close()
    time.sleep(0.1)
    client.close()
    server.close()


def test_a_listener_blocks_every_protocol(listener: tuple[socket.socket, int]) -> None:
    _, port = listener
    assert not WAIT["bindable"]("tcp", "0.0.0.0", port)
    assert not WAIT["bindable"]("ucx", "0.0.0.0", port)


def test_time_wait_blocks_ucx_only(listener: tuple[socket.socket, int]) -> None:
    server, port = listener
    time_wait(server, port)
    assert WAIT["bindable"]("tcp", "0.0.0.0", port)
    assert WAIT["bindable"]("http", "127.0.0.1", port)
    assert not WAIT["bindable"]("ucx", "0.0.0.0", port)


def test_cli_waits_then_names_what_is_taken(listener: tuple[socket.socket, int],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    server, port = listener
    time_wait(server, port)
    assert WAIT["main"](["--timeout", "0.5", f"tcp://0.0.0.0:{port}"]) == 0
    started = time.monotonic()
    assert WAIT["main"](["--timeout", "1", f"ucx://0.0.0.0:{port}"]) == 1
    assert time.monotonic() - started >= 1
    assert f"ucx://0.0.0.0:{port}" in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["8786", "udp://0.0.0.0:8786", "tcp://0.0.0.0:0", "tcp://host:port", "ucx://:70000"])
def test_bad_endpoints_are_refused(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        WAIT["main"]([bad])
    assert exited.value.code == 2
    assert "PROTOCOL://HOST:PORT" in capsys.readouterr().err


def test_nothing_taken_returns_at_once() -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port: Any = probe.getsockname()[1]
    probe.close()
    assert WAIT["wait"]([("ucx", "127.0.0.1", port)], 5) == (0.0, [])
