"""Taking a live control store away from the platform, for real, and giving it back.

- PostgreSQL: a loopback TCP proxy in front of the server; `down()` resets every connection through
  it and refuses new ones (as a stopped or unreachable server does), `up()` lets them through again.
- SQLite: another connection holds the database's write lock (`BEGIN EXCLUSIVE`), so every
  transaction of the platform waits out its busy timeout and fails "database is locked".
"""

from __future__ import annotations

import socket
import sqlite3
import threading
from contextlib import suppress
from pathlib import Path
from typing import Protocol


class StoreGate(Protocol):
    def down(self) -> None: ...
    def up(self) -> None: ...
    def close(self) -> None: ...


class PostgresGate:
    def __init__(self, upstream_port: int) -> None:
        self._upstream = ("127.0.0.1", upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._down = False
        threading.Thread(target=self._accept_loop, name="store-gate", daemon=True).start()

    def down(self) -> None:
        with self._lock:
            self._down = True
            sockets, self._open = self._open, []
        for s in sockets:
            _reset(s)

    def up(self) -> None:
        with self._lock:
            self._down = False

    def close(self) -> None:
        self.down()
        with suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()

    def _accept_loop(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                refused = self._down
            if refused:
                _reset(client)
                continue
            try:
                server = socket.create_connection(self._upstream)
            except OSError:
                _reset(client)
                continue
            with self._lock:
                self._open += [client, server]
            for src, dst in ((client, server), (server, client)):
                threading.Thread(target=_pump, args=(src, dst), daemon=True).start()


class SqliteGate:
    def __init__(self, path: Path) -> None:
        self._connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)

    def down(self) -> None:
        self._connection.execute("BEGIN EXCLUSIVE")

    def up(self) -> None:
        if self._connection.in_transaction:
            self._connection.execute("ROLLBACK")

    def close(self) -> None:
        self.up()
        self._connection.close()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    _reset(dst)


def _reset(s: socket.socket) -> None:
    with suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)
    s.close()
