"""Peers for the outbound-call tests (ADR 0040): resolvers that answer what a test says,
and a raw loopback HTTP server that counts what it managed to send.

``FloodServer`` answers every request with a status and a body it writes lazily, chunk
by chunk, until the body is done or the client hangs up: ``sent`` is what the kernel took
from it per connection, so it bounds what the client could have read, measured on the
server's side (not from the client's memory).
"""

from __future__ import annotations

import ipaddress
import socket
import socketserver
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sessionwire.domain.egress import IPAddress

# Loopback peers are refused unless named (decision 40): every test that calls one says so.
LOOPBACK_EGRESS = {"http": {"egress": {"allow": ["127.0.0.1"]}}}
# A public address (example.com's) for names a test resolves itself: never connected to
# by these tests, whose transports are in-process.
PUBLIC = ipaddress.ip_address("93.184.215.14")


def resolving(table: dict[str, str]) -> tuple[list[str], object]:
    """A resolver answering from ``table`` (host -> address), and the hosts it was asked."""
    asked: list[str] = []

    async def resolve(host: str, port: int) -> list[IPAddress]:
        asked.append(host)
        return [ipaddress.ip_address(table[host])]

    return asked, resolve


async def public_resolver(host: str, port: int) -> list[IPAddress]:
    return [PUBLIC]


@dataclass
class Connection:
    head: bytes = b""
    sent: int = 0


@dataclass
class FloodServer:
    status: int = 500
    body_bytes: int = 400 * 1024 * 1024
    chunk: int = 64 * 1024
    body: bytes | None = None
    """A fixed body instead of the flood."""
    headers: dict[str, str] = field(default_factory=dict)
    tls: ssl.SSLContext | None = None
    """Serve https with this context (the server's certificate in it)."""
    connections: list[Connection] = field(default_factory=list)
    arrived: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))
    port: int = 0

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def _answer(self, sock: socket.socket) -> None:
        # A small send buffer: what the kernel holds for a client that reads nothing is
        # then small too, so ``sent`` is close to what the client could have read.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 32 * 1024)
        if self.tls is not None:
            try:
                sock = self.tls.wrap_socket(sock, server_side=True)
            except (ssl.SSLError, OSError):
                return  # the client refused the certificate
        connection = Connection()
        self.connections.append(connection)
        data = b""
        while b"\r\n\r\n" not in data:
            got = sock.recv(65536)
            if not got:
                return
            data += got
        head, _, rest = data.partition(b"\r\n\r\n")
        connection.head = head
        length = next(
            (
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            ),
            0,
        )
        while len(rest) < length:
            got = sock.recv(65536)
            if not got:
                break
            rest += got
        self.arrived.release()
        extra = "".join(f"{name}: {value}\r\n" for name, value in self.headers.items())
        size = self.body_bytes if self.body is None else len(self.body)
        sock.sendall(
            f"HTTP/1.1 {self.status} Whatever\r\nContent-Length: {size}\r\n"
            f"Content-Type: application/json\r\nConnection: close\r\n{extra}\r\n".encode()
        )
        if self.body is not None:
            sock.sendall(self.body)
            connection.sent = len(self.body)
            return
        block = b"x" * self.chunk
        left = self.body_bytes
        try:
            while left > 0:
                piece = block[: min(left, self.chunk)]
                sock.sendall(piece)
                connection.sent += len(piece)
                left -= len(piece)
        except OSError:
            return  # the client hung up: what it had is connection.sent at most

    @contextmanager
    def running(self) -> Iterator[FloodServer]:
        flood = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                flood._answer(self.request)

        server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        self.port = server.server_address[1]
        thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
        thread.start()
        try:
            yield self
        finally:
            server.shutdown()
            server.server_close()
            thread.join(30)


def certificate_for(name: str, folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for the DNS name ``name`` only (no IP address in it), and
    its key: a client that checks it against an address instead of the name fails."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / f"{name}.crt", folder / f"{name}.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path
