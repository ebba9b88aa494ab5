"""Secrets masked in what a session reads of *another* session (contract: issue 15 item 4).

Only the view is masked: the session's own transcript, the event log and audit exports
keep every byte as recorded, so a replayed context is the one the agent really had
(OpenClaw's redaction at write time corrupted replayed contexts).

Patterns are RE2 (google-re2): matching takes time linear in the text whatever the
pattern, so neither the defaults nor a configured pattern can backtrack catastrophically
on a crafted message. A pattern with a group named ``secret`` masks only that group (the
value after ``Bearer`` or ``password=``); otherwise the whole match is masked.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

import re2
from sessionwire.domain.errors import SessionwireError

MASK = "[redacted:{name}]"
# Strings up to this length have their masked form cached (at most SHORT_CACHE of them).
SHORT_TEXT = 64
SHORT_CACHE = 4096
# Message fields that hold no free text: left alone whatever they look like.
_STRUCTURAL = frozenset({"role", "type", "timestamp", "id", "toolCallId", "toolName", "name"})
# ``[^`` opening a negated class (its ``[`` not escaped): the one ``^`` that is no anchor.
_NEGATED_CLASS = re.compile(r"(?<!\\)\[\^")


class InvalidPattern(SessionwireError, ValueError):
    """A configured pattern RE2 cannot compile (RE2 has no backreferences or lookaround)."""


# (name, pattern). Each is anchored on a literal prefix or a word boundary, so text
# that merely resembles a secret (a word, a hash, a public key) is left as it is.
DEFAULT_PATTERNS: tuple[tuple[str, str], ...] = (
    (
        "private-key",
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----"
        r"(?:[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----|[\s\S]*)",
    ),
    ("api-key", r"\bsk-(?:ant-|proj-|svcacct-|or-)?[A-Za-z0-9_-]{20,}"),
    ("aws-access-key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    ("github-token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})\b"),
    ("slack-token", r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    ("google-api-key", r"\bAIza[0-9A-Za-z_-]{35}"),
    ("stripe-key", r"\b(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}"),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ("bearer-token", r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9._~+/-]{16,}=*)"),
    (
        "url-password",
        r"(?i)\b[a-z][a-z0-9+.-]*://[^\s/:@]+:(?P<secret>[^\s/@]+)@",
    ),
    (
        "assigned-secret",
        r"(?i)\b[a-z0-9_]*(?:api[_-]?key|secret|token|passw(?:or)?d)[a-z0-9_]*[\"']?\s*[:=]\s*"
        r"[\"']?(?P<secret>[^\s\"',;\[]{8,})",
    ),
)


@dataclass(frozen=True)
class _Pattern:
    name: str
    regex: Any  # a compiled re2 pattern
    group: int  # the group masked (0: the whole match)


class Redactor:
    """Masks every match of its patterns in a message's text."""

    def __init__(self, patterns: Iterable[tuple[str, str]]) -> None:
        self._patterns = [_compile(name, text) for name, text in patterns]
        # What this redactor masks, as one text: two redactors with the same patterns (in
        # the same order, under the same names) mask alike. History views rendered at
        # write time carry it, so a reader under other patterns renders them again.
        self.fingerprint = hashlib.sha256(
            "\0".join(f"{p.name}\1{p.regex.pattern}" for p in self._patterns).encode()
        ).hexdigest()[:32]
        # One pass over the text finds which patterns match at all: most texts hold no
        # secret, and searching each pattern in turn cost ~1.7 ms per message.
        self._any = re2.Set.SearchSet(_options())
        for pattern in self._patterns:
            self._any.Add(pattern.regex.pattern)
        self._any.Compile()
        # Short strings repeat (a provenance kind, a session key): their answer is kept.
        self._short: dict[str, str] = {}
        self._context_free = all(_anchor_free(pattern.regex.pattern) for pattern in self._patterns)

    def finds_nothing_in(self, text: str) -> bool:
        """True only when masking any piece of ``text`` that starts and ends beside a
        non-word character (or an end of ``text``) returns that piece unchanged.

        A match inside such a piece is a match inside ``text``: the patterns look at
        nothing outside their match but word boundaries, and those see the same
        characters there. Patterns with anchors (``^``, ``$``, ``\\A``, ``\\z``) see the
        ends of the piece, so a redactor holding one answers False.
        """
        if not self._patterns:
            return True
        return self._context_free and not self._any.Match(text)

    def mask_text(self, text: str) -> str:
        matched = self._any.Match(text) if self._patterns else None
        if not matched:
            return text
        for index in sorted(matched):
            pattern = self._patterns[index]
            pieces: list[str] = []
            end = 0
            for match in pattern.regex.finditer(text):
                start, stop = match.span(pattern.group)
                if start < 0 or stop <= start:
                    continue
                pieces.append(text[end:start])
                pieces.append(MASK.format(name=pattern.name))
                end = stop
            pieces.append(text[end:])
            text = "".join(pieces)
        return text

    def mask(self, value: Any) -> Any:
        """``value`` (a message, its content blocks, ...) with every string masked."""
        if isinstance(value, str):
            if len(value) > SHORT_TEXT:
                return self.mask_text(value)
            masked = self._short.get(value)
            if masked is None:
                if len(self._short) >= SHORT_CACHE:
                    self._short.clear()
                masked = self._short[value] = self.mask_text(value)
            return masked
        if isinstance(value, list):
            return [self.mask(item) for item in value]
        if isinstance(value, dict):
            return {
                key: item if key in _STRUCTURAL else self.mask(item) for key, item in value.items()
            }
        return value


def _anchor_free(pattern: str) -> bool:
    """No anchor in ``pattern``; answers False for some that have none (an escaped ``^``)."""
    rest = _NEGATED_CLASS.sub("", pattern)
    return not any(anchor in rest for anchor in ("^", "$", "\\A", "\\z"))


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False
    return options


def _compile(name: str, text: str) -> _Pattern:
    try:
        regex = re2.compile(text, _options())
    except re2.error as error:
        raise InvalidPattern(f"{text!r} is not an RE2 pattern: {error}") from None
    return _Pattern(name=name, regex=regex, group=regex.groupindex.get("secret", 0))


def check_pattern(text: str) -> str:
    """``text`` when RE2 compiles it; InvalidPattern otherwise (for config validation)."""
    _compile("configured", text)
    return text


@cache
def redactor_for(configured: tuple[str, ...], *, defaults: bool = True) -> Redactor:
    """The redactor for a config's patterns, built once per distinct set."""
    named = [("configured", text) for text in configured]
    return Redactor([*(DEFAULT_PATTERNS if defaults else ()), *named])
