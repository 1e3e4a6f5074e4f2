"""A scriptable fake HTTP/2 server over TLS on 127.0.0.1, for vendors that speak only HTTP/2
(APNs). It is a :class:`~tests.fakes._server.Scripted` fake as the HTTP/1.1 ones are: a subclass
implements ``verify`` and ``succeed``; tests ``script`` replies, set ``delay_s``, hang or drop
(``Reply(hang_s=…)``, ``Reply(close=True)``: the whole connection, as a server going away
does) and read ``requests``.

TLS uses a certificate authority and a server certificate for ``127.0.0.1`` made at start
(:func:`tests.fakes._tls.make_tls`), so a client verifies the server with ``ca_file`` as it
would a vendor's; ALPN offers only ``h2``. Each connection is served by one thread that alone reads and writes
its socket (the h2 state machine is not thread-safe); each request is answered by a thread
of its own, so a slow or hanging answer holds up no other stream, as with the vendor.
"""

from __future__ import annotations

import queue
import socket
import ssl
import threading
import time
from urllib.parse import parse_qs, urlsplit

import h2.config
import h2.connection
import h2.events
import h2.exceptions

from tests.fakes._server import Received, Reply, Scripted
from tests.fakes._tls import Tls

__all__ = ["H2FakeServer"]


class _Connection:
    """One client connection: its socket, its h2 state, and the answers ready to be written."""

    def __init__(self, server: H2FakeServer, sock: ssl.SSLSocket) -> None:
        self.server = server
        self.sock = sock
        self.h2 = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        )
        self.ready: queue.SimpleQueue[tuple[int, Reply | None, Received | None]] = queue.SimpleQueue()
        self.streams: dict[int, tuple[list[tuple[str, str]], bytearray]] = {}

    def serve(self) -> None:
        self.h2.initiate_connection()
        self.sock.sendall(self.h2.data_to_send())
        self.sock.settimeout(0.01)
        try:
            while not self.server.stopping.is_set():
                try:
                    data = self.sock.recv(65536)
                except TimeoutError:
                    data = None
                if data == b"":
                    return
                if data:
                    for event in self.h2.receive_data(data):
                        if self._event(event):
                            return
                if self._write_ready():
                    return
                out = self.h2.data_to_send()
                if out:
                    self.sock.sendall(out)
        except (OSError, h2.exceptions.ProtocolError):
            return
        finally:
            try:
                self.sock.close()
            except OSError:
                pass

    def _event(self, event: h2.events.Event) -> bool:
        if isinstance(event, h2.events.RequestReceived):
            headers = [(str(k), str(v)) for k, v in event.headers or []]
            self.streams[event.stream_id or 0] = (headers, bytearray())
        elif isinstance(event, h2.events.DataReceived):
            stream = self.streams.get(event.stream_id or 0)
            if stream is not None:
                stream[1].extend(event.data or b"")
            self.h2.acknowledge_received_data(event.flow_controlled_length or 0, event.stream_id or 0)
        elif isinstance(event, h2.events.StreamEnded):
            stream = self.streams.pop(event.stream_id or 0, None)
            if stream is not None:
                threading.Thread(
                    target=self._answer, args=(event.stream_id or 0, *stream), daemon=True
                ).start()
        elif isinstance(event, h2.events.StreamReset):
            self.streams.pop(event.stream_id or 0, None)
        elif isinstance(event, h2.events.ConnectionTerminated):
            return True
        return False

    def _answer(self, stream_id: int, headers: list[tuple[str, str]], body: bytearray) -> None:
        pseudo = {k: v for k, v in headers if k.startswith(":")}
        parts = urlsplit(pseudo.get(":path", "/"))
        received = Received(
            pseudo.get(":method", ""),
            parts.path,
            parse_qs(parts.query),
            # every header as sent, repeated ones joined with "\n" (a fake may refuse them)
            _joined([(k, v) for k, v in headers if not k.startswith(":")]),
            bytes(body),
        )
        reply = self.server._next(received)
        if self.server.delay_s:
            time.sleep(self.server.delay_s)
        if reply.hang_s:
            time.sleep(reply.hang_s)
        self.ready.put((stream_id, reply, received))

    def _write_ready(self) -> bool:
        while True:
            try:
                stream_id, reply, received = self.ready.get_nowait()
            except queue.Empty:
                return False
            if reply is None or received is None:
                continue
            if reply.close:
                self.sock.close()
                return True
            payload, content_type = reply.encoded()
            headers = [(":status", str(reply.status))]
            if payload:
                headers += [("content-type", content_type), ("content-length", str(len(payload)))]
            headers += [(k.lower(), v) for k, v in reply.headers.items() if k.lower() != "content-type"]
            try:
                self.h2.send_headers(stream_id, headers, end_stream=not payload)
                if payload:
                    self.h2.send_data(stream_id, payload, end_stream=True)
            except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
                continue  # the client gave up on the stream (its timeout): nothing to answer
            self.sock.sendall(self.h2.data_to_send())
            self.server.answered(received)


def _joined(pairs: list[tuple[str, str]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in pairs:
        out[name] = f"{out[name]}\n{value}" if name in out else value
    return out


class H2FakeServer(Scripted):
    """Base of the HTTP/2 vendor fakes: TLS with ALPN h2 and a script of answers."""

    def __init__(self, tls: Tls) -> None:
        super().__init__()
        self.tls = tls
        self.stopping = threading.Event()
        self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._context.minimum_version = ssl.TLSVersion.TLSv1_2
        self._context.load_cert_chain(tls.cert_file, tls.key_file)
        self._context.set_alpn_protocols(["h2"])
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self._listener.settimeout(0.05)
        self._sockets: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, name=type(self).__name__, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._listener.getsockname()[:2]
        return f"https://{host}:{port}"

    @property
    def ca_file(self) -> str:
        return self.tls.ca_file

    def stop(self) -> None:
        self.stopping.set()
        self._thread.join(5)
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                try:
                    sock.close()
                except OSError:
                    pass

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                raw, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        raw.settimeout(5)
        try:
            sock = self._context.wrap_socket(raw, server_side=True)
        except (OSError, ssl.SSLError):
            raw.close()
            return
        if sock.selected_alpn_protocol() != "h2":
            sock.close()
            return
        with self._lock:
            self._sockets.append(sock)
        _Connection(self, sock).serve()

    def close_connections(self) -> None:
        """Drop every open connection (as a vendor's server going away)."""
        with self._lock:
            for sock in self._sockets:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
