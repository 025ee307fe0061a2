"""A loopback TCP proxy that a test cuts: the way SDK tests break a live gRPC stream for real.

`cut()` closes the client side of every open connection, so the client sees its connection drop
(UNAVAILABLE), while the server side stays open and unread until `close()`: the server sees no
disconnect, so what the client does next (Resume, a retry) is all that is tested. New connections
are accepted as before. Two modes act on the frames the server sends back (HTTP/2: a 9-byte
header of length, type, flags, stream), so a break lands at the same point of a stream however fast
either side runs:
- `cut_after_data(n)`: the next connection is cut as soon as n DATA frames (responses) went through;
- `hold()`: new connections pass the server's connection set-up back but nothing from the first
  response HEADERS frame on: the server receives the call, the client hears nothing of it.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress


class TcpProxy:
    def __init__(self, upstream_port: int) -> None:
        self._upstream = ("127.0.0.1", upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._clients: list[socket.socket] = []  # client sides not yet cut
        self._held: list[socket.socket] = []  # every socket, closed at close()
        self._holding = False
        self._cut_after: int | None = None
        self.accepted = 0  # connections accepted so far
        self._thread = threading.Thread(target=self._accept_loop, name="tcp-proxy", daemon=True)
        self._thread.start()

    def cut(self) -> int:
        """Drops the client side of every open connection; returns how many were cut."""
        with self._lock:
            clients, self._clients = self._clients, []
        for c in clients:
            _shut(c)
        return len(clients)

    def hold(self, holding: bool = True) -> None:
        with self._lock:
            self._holding = holding

    def cut_after_data(self, frames: int) -> None:
        with self._lock:
            self._cut_after = frames

    def close(self) -> None:
        _shut(self._listener)  # shutdown() wakes the blocked accept(); close() alone does not
        self._thread.join()
        with self._lock:
            sockets = self._held + self._clients
        for s in sockets:
            _shut(s)

    def _accept_loop(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            upstream = socket.create_connection(self._upstream)
            with self._lock:
                self.accepted += 1
                self._clients.append(client)
                self._held += [client, upstream]
                holding, cut_after, self._cut_after = self._holding, self._cut_after, None
            threading.Thread(target=_pump, args=(client, upstream), daemon=True).start()
            if holding or cut_after is not None:
                back = threading.Thread(target=self._pump_frames, args=(upstream, client, cut_after))
            else:
                back = threading.Thread(target=_pump, args=(upstream, client))
            back.daemon = True
            back.start()

    def _pump_frames(self, src: socket.socket, dst: socket.socket, cut_after: int | None) -> None:
        """Copies whole frames until the first HEADERS frame (type 1: hold), or until `cut_after` DATA
        frames (type 0) went through (then cuts dst); then stops reading src."""
        buffer, data_frames = b"", 0
        try:
            while data := src.recv(65536):
                buffer += data
                while len(buffer) >= 9 and len(buffer) >= 9 + int.from_bytes(buffer[:3], "big"):
                    end = 9 + int.from_bytes(buffer[:3], "big")
                    if cut_after is None and buffer[3] == 1:
                        return
                    dst.sendall(buffer[:end])
                    data_frames += buffer[3] == 0 and end > 9
                    buffer = buffer[end:]
                    if data_frames == cut_after:
                        with self._lock:
                            if dst in self._clients:
                                self._clients.remove(dst)
                        _shut(dst)
                        return
        except OSError:
            pass


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """Copies src to dst until either fails. An end of src is not passed on: a cut client must not
    look like a disconnect to the server (close() ends the server sides)."""
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass


def _shut(s: socket.socket) -> None:
    with suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)
    s.close()


@contextmanager
def proxy_to(port: int) -> Iterator[TcpProxy]:
    proxy = TcpProxy(port)
    try:
        yield proxy
    finally:
        proxy.close()
