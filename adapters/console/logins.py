"""Who is logged in to the console: a random login id in the browser's cookie, the
operator token it was opened with kept here, in the server's memory only.

The cookie used to hold the operator token itself, so the browser kept (and anything that
read its cookie jar could take) a bearer token that also works on the write API. A login
id opens the console and nothing else; it ends at logout, after ``LOGIN_SECONDS``, when
the server restarts, or as soon as its token stops being an operator token.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

# How long a login lasts (the cookie's max-age says the same to the browser).
LOGIN_SECONDS = 8 * 3600
# Logins kept at once; the oldest goes first past this (each is a few hundred bytes).
MAX_LOGINS = 1000
# How long a login link's one-time code stays good (it is printed to be opened at once).
CODE_SECONDS = 600


@dataclass(frozen=True)
class _Login:
    token: str
    until: float


class ConsoleLogins:
    """The console's open logins, by id."""

    def __init__(
        self,
        *,
        lifetime: float = LOGIN_SECONDS,
        limit: int = MAX_LOGINS,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lifetime = lifetime
        self._limit = limit
        self._now = now
        self._open: OrderedDict[str, _Login] = OrderedDict()
        self._codes: dict[str, _Login] = {}

    def open(self, token: str) -> str:
        """A new login for ``token`` (already checked to be an operator's): its id."""
        while len(self._open) >= self._limit:
            self._open.popitem(last=False)
        login_id = secrets.token_urlsafe(32)
        self._open[login_id] = _Login(token=token, until=self._now() + self._lifetime)
        return login_id

    def invite(self, token: str) -> str:
        """A one-time code that logs in as ``token`` once, within ``CODE_SECONDS``: what a
        printed login link carries instead of the token (an address is kept in browser
        history and access logs; a spent code is worth nothing there)."""
        code = secrets.token_urlsafe(32)
        self._codes[code] = _Login(token=token, until=self._now() + CODE_SECONDS)
        return code

    def redeem(self, code: str) -> str | None:
        """The token a one-time code stands for, spending it; None if unknown or late."""
        login = self._codes.pop(code, None)
        if login is None or self._now() >= login.until:
            return None
        return login.token

    def token_of(self, login_id: str | None) -> str | None:
        """The token the login ``login_id`` was opened with; None if there is no such
        login or it has expired."""
        if not login_id:
            return None
        login = self._open.get(login_id)
        if login is None:
            return None
        if self._now() >= login.until:
            del self._open[login_id]
            return None
        return login.token

    def close(self, login_id: str | None) -> None:
        if login_id:
            self._open.pop(login_id, None)

    def __len__(self) -> int:
        return len(self._open)


__all__ = ["CODE_SECONDS", "LOGIN_SECONDS", "ConsoleLogins"]
