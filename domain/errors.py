"""The root of every error sessionwire raises (``except sessionwire.SessionwireError``).

Each error keeps the built-in base it had (``ValueError`` for bad input, ``LookupError``
for what is not there, ``RuntimeError`` for a state that refuses the call), so code
that caught those still does; this root is what an embedder catches to tell ours from
everything else.
"""

from __future__ import annotations


class SessionwireError(Exception):
    """Raised by sessionwire (every error class of the package derives from it)."""


__all__ = ["SessionwireError"]
