"""Bearer tokens with a scope (contract decision 22): each token is one session's or an
operator's.

A tokens file (JSON or YAML) lists them::

    {"tokens": [{"token": "…", "session": "main"},
                {"tokenSha256": "<64 hex digits>", "role": "operator"}]}

A token given as ``tokenSha256`` is never on disk in clear. A session-bound token acts
only as its session; an operator token may name any requester and call every method. A
lone token (``SESSIONWIRE_TOKEN``, ``--token-file``) is an operator token.

Tokens are compared by their SHA-256 digests in constant time, every entry every time,
so neither a near miss nor which entry matched shows in the response time.

The minimum length (beyond loopback) is checked where it can be: a token in clear when
the file is read, a ``tokenSha256`` entry (a digest has no length) when its token is
first presented: a matching token shorter than ``min_length`` is refused, and logged.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from sessionwire.application.library_logging import library_logger
from sessionwire.domain.errors import SessionwireError

# Beyond loopback a guessable token is the only guard: the CLI refuses shorter ones there.
MIN_TOKEN_LENGTH = 32
MAX_TOKENS_FILE_BYTES = 1024 * 1024
OPERATOR = "operator"

log = library_logger("sessionwire.http")


class TokenFileError(SessionwireError, ValueError):
    """A tokens file that cannot be used; the message says why (never the token)."""


def token_digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()


@dataclass(frozen=True)
class Grant:
    """What a presented token may do: act as ``session``, or as an operator (None)."""

    session: str | None
    label: str
    """How logs name the grant (never the token): ``operator#1``, ``session main#2``."""

    @property
    def is_operator(self) -> bool:
        return self.session is None


class TokenEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    token: str | None = Field(default=None, min_length=1, max_length=4096)
    tokenSha256: str | None = Field(default=None, pattern=r"^[0-9a-fA-F]{64}$")
    session: str | None = Field(default=None, min_length=1, max_length=512)
    role: Literal["operator"] | None = None

    @model_validator(mode="after")
    def _one_of_each(self) -> TokenEntry:
        if (self.token is None) == (self.tokenSha256 is None):
            raise ValueError("give exactly one of token and tokenSha256")
        if (self.session is None) == (self.role is None):
            raise ValueError('give exactly one of session and role ("operator")')
        if self.token is not None and self.token != self.token.strip():
            raise ValueError("a token may not start or end with whitespace")
        return self


class TokensFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tokens: list[TokenEntry] = Field(min_length=1, max_length=10_000)


@dataclass(frozen=True)
class TokenSet:
    """The accepted tokens: digests with their grants."""

    entries: tuple[tuple[bytes, Grant], ...]
    shortest_clear: int | None = None
    """The length of the shortest token given in clear (hashed ones cannot be measured)."""
    min_length: int = 0
    """Presented tokens shorter than this are refused even when a digest matches: the
    length check of ``tokenSha256`` entries, which can be measured only when presented."""

    def requiring(self, min_length: int) -> TokenSet:
        """The same tokens, presented ones shorter than ``min_length`` refused."""
        return replace(self, min_length=min_length)

    @classmethod
    def operator(cls, token: str) -> TokenSet:
        """One operator token (``SESSIONWIRE_TOKEN`` or ``--token-file``)."""
        token = token.strip()
        if not token:
            raise TokenFileError("the token is empty")
        return cls(((token_digest(token), Grant(None, "operator")),), len(token))

    @classmethod
    def from_data(cls, data: Any) -> TokenSet:
        try:
            parsed = TokensFile.model_validate(data)
        except ValidationError as error:
            # Only where and what, never the input value (it may be a token).
            problem = error.errors()[0]
            where = ".".join(str(part) for part in problem["loc"]) or "the file"
            raise TokenFileError(f"{where}: {problem['msg']}") from None
        entries: list[tuple[bytes, Grant]] = []
        seen: set[bytes] = set()
        for number, entry in enumerate(parsed.tokens, start=1):
            digest = (
                token_digest(entry.token)
                if entry.token is not None
                else bytes.fromhex(entry.tokenSha256 or "")
            )
            if digest in seen:
                raise TokenFileError(f"tokens.{number - 1}: the same token is listed twice")
            seen.add(digest)
            label = f"operator#{number}" if entry.role else f"session {entry.session}#{number}"
            entries.append((digest, Grant(entry.session, label)))
        clear = [len(e.token) for e in parsed.tokens if e.token is not None]
        return cls(tuple(entries), min(clear) if clear else None)

    @classmethod
    def from_file(cls, path: str | Path) -> TokenSet:
        """Read a JSON or YAML tokens file: its owner's only (0600 or stricter), bounded
        in size; errors never quote a token."""
        file = Path(path).expanduser()
        try:
            with file.open("rb") as stream:
                mode = os.fstat(stream.fileno()).st_mode
                raw = stream.read(MAX_TOKENS_FILE_BYTES + 1)
        except OSError as error:
            raise TokenFileError(f"cannot read the tokens file {file}: {error.strerror}") from None
        if mode & 0o077:
            # As ssh does with keys: a secret others can read is refused, not used.
            raise TokenFileError(
                f"the tokens file {file} can be read by others (mode {mode & 0o777:o}); "
                f"run `chmod 600 {file}`"
            )
        if len(raw) > MAX_TOKENS_FILE_BYTES:
            raise TokenFileError(f"the tokens file {file} is larger than 1 MiB")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise TokenFileError(f"the tokens file {file} is not UTF-8") from None
        try:
            data = json.loads(text) if text.lstrip().startswith("{") else yaml.safe_load(text)
        except (ValueError, yaml.YAMLError, RecursionError):
            raise TokenFileError(f"the tokens file {file} is not valid JSON or YAML") from None
        try:
            return cls.from_data(data)
        except TokenFileError as error:
            raise TokenFileError(f"{file}: {error}") from None

    def grant_for(self, presented: str | None) -> Grant | None:
        """The grant of the presented token, or None. Compares with every entry."""
        given = token_digest(presented or "")
        found: Grant | None = None
        for digest, grant in self.entries:
            if hmac.compare_digest(given, digest) and presented:
                found = grant
        if found is not None and presented is not None and len(presented) < self.min_length:
            log.warning(
                "token refused: shorter than the minimum length",
                grant=found.label,
                min_length=self.min_length,
            )
            return None
        return found
