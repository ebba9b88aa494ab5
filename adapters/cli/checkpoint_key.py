"""The checkpoint signing key: an Ed25519 private key in a file only its owner can read.

Where: ``--key PATH``, else ``$SESSIONWIRE_CHECKPOINT_KEY``, else ``checkpoint.key`` in
the data directory's ``keys/`` folder. Made on first use (the folder 0700, the file 0600,
created exclusively, so two first uses never overwrite each other's key); a key file
that others can read or write is refused, as ssh refuses one.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from sessionwire.adapters.cli.context import EXIT_USAGE, fail

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

KEY_ENV = "SESSIONWIRE_CHECKPOINT_KEY"
KEY_HELP = (
    f"the checkpoint signing key file (default: ${KEY_ENV}, else keys/checkpoint.key in the "
    "data dir; made on first use, 0600)"
)


def default_key_path() -> Path:
    env = os.environ.get(KEY_ENV)
    if env:
        return Path(env).expanduser()
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "sessionwire" / "keys" / "checkpoint.key"


def key_path(option: str | None) -> Path:
    return Path(option).expanduser() if option else default_key_path()


def key_configured(option: str | None) -> bool:
    """Whether a key was chosen (option or environment) or the default one exists."""
    return bool(option) or bool(os.environ.get(KEY_ENV)) or default_key_path().exists()


def private_file(path: Path, make: Callable[[], bytes]) -> tuple[bytes, bool]:
    """The bytes of a secret file only its owner can read, made at ``path`` by ``make``
    first if there is none (the folder 0700, the file 0600, created exclusively, so two
    first uses never overwrite each other's); and whether it was made here. A file that
    others can read or write is refused, as ssh refuses a key."""
    if not path.exists():
        folder = path.parent
        if not folder.exists():
            folder.mkdir(mode=0o700, parents=True)
            folder.chmod(0o700)  # mkdir's mode is masked by the umask
        made = make()
        try:
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass  # made by someone else meanwhile: read theirs below
        except OSError as error:
            fail(f"cannot create key file {path}: {error.strerror}", EXIT_USAGE)
        else:
            with open(descriptor, "wb") as file:
                file.write(made)
            return made, True
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        fail(
            f"key file {path} is open to other users (mode {mode:04o}); "
            f"chmod 600 {path} if it is still yours to trust",
            EXIT_USAGE,
        )
    try:
        return path.read_bytes(), False
    except OSError as error:
        fail(f"cannot read key file {path}: {error.strerror}", EXIT_USAGE)


def load_or_create_key(path: Path) -> tuple[Ed25519PrivateKey, bool]:
    """The key at ``path``, made there first if there is none; and whether it was made."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
        load_pem_private_key,
    )

    def new_key() -> bytes:
        generated = Ed25519PrivateKey.generate()
        return generated.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())

    pem, made = private_file(path, new_key)
    try:
        loaded = load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as error:
        fail(f"cannot read key file {path}: {error}", EXIT_USAGE)
    if not isinstance(loaded, Ed25519PrivateKey):
        fail(f"key file {path} holds no Ed25519 private key", EXIT_USAGE)
    return loaded, made


def event_cursor_key() -> bytes:
    """The secret that seals session-bound subscribers' event ids (docs/http.md): in the
    data directory's ``keys/`` folder beside the checkpoint key, made on first use, so
    a client resumes with its ``Last-Event-ID`` across gateway restarts."""
    path = default_key_path().with_name("event-cursors.key")
    secret, _ = private_file(path, lambda: os.urandom(32))
    if len(secret) < 32:
        fail(f"key file {path} holds fewer than 32 bytes", EXIT_USAGE)
    return secret
