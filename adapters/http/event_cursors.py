"""Event ids that reveal nothing a session-bound subscriber may not see (issue 27).

An operator's stream gives log positions as ids: an auditor reads the log by them. A
session-bound token sees only some events, and a position would tell it how many it
was not shown in between. Its stream's ids (and each event's ``cursor``) are the
position sealed instead: one AES block (the position, the place inside a batch, and
four zero bytes that a forged or garbled id fails) under a key of its own session,
derived from the gateway's cursor secret. Sealing is a permutation, so ids of one
subscriber neither order nor count anything; the gateway opens them again to resume
exactly where the client stood, across restarts while the secret stays (``serve``
keeps it in the data directory's ``keys/`` folder).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import struct
from typing import Any

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from sessionwire.application.event_stream.subscription import parse_cursor

_BLOCK = struct.Struct(">QII")  # position, events of the batch passed, zero check
SEALED_LENGTH = 22  # one 16-byte block, base64url without padding


class EventCursors:
    """Seals and opens the cursors of session-bound subscribers."""

    def __init__(self, secret: bytes | None = None) -> None:
        # Without a kept secret (an app built in a test, say) ids hold for this process.
        self._secret = secret if secret is not None else os.urandom(32)

    def _cipher(self, session_key: str) -> Cipher[Any]:
        key = hmac.new(self._secret, session_key.encode(), hashlib.sha256).digest()[:16]
        return Cipher(algorithms.AES(key), modes.ECB())  # one block: a keyed permutation

    def seal(self, session_key: str, cursor: str) -> str:
        position, passed = parse_cursor(cursor)
        encryptor = self._cipher(session_key).encryptor()
        block = encryptor.update(_BLOCK.pack(position, passed, 0)) + encryptor.finalize()
        return base64.urlsafe_b64encode(block).decode().rstrip("=")

    def open(self, session_key: str, sealed: str) -> str:
        """The cursor a sealed id stands for; ValueError for anything this session's key
        did not seal (another session's id, a position, a garbled one)."""
        if len(sealed) != SEALED_LENGTH:
            raise ValueError("not an event id of this stream")
        try:
            block = base64.b64decode(sealed + "==", altchars=b"-_", validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("not an event id of this stream") from None
        if len(block) != _BLOCK.size:
            raise ValueError("not an event id of this stream")
        decryptor = self._cipher(session_key).decryptor()
        position, passed, check = _BLOCK.unpack(decryptor.update(block) + decryptor.finalize())
        if check != 0:
            raise ValueError("not an event id of this stream")
        return f"{position}.{passed}" if passed else str(position)

    def sealed_event(self, session_key: str, event: dict[str, Any]) -> dict[str, Any]:
        """The event as a bound subscriber gets it: no log position, a sealed cursor."""
        shown = {name: value for name, value in event.items() if name != "position"}
        shown["cursor"] = self.seal(session_key, str(event["cursor"]))
        return shown


__all__ = ["SEALED_LENGTH", "EventCursors"]
