"""What a transcript search matches, and the snippet a match shows (decision 35).

A query is its words: runs of letters and digits, lower-cased (punctuation, spaces and
underscores separate them, as SQLite's ``unicode61`` tokenizer and the PostgreSQL index's
text do). A message matches when every word of the query is one of its text's words; the
stores' indexes only propose candidates, and this decides, on the text the caller reads.
"""

from __future__ import annotations

import re
from typing import Any

_WORD = re.compile(r"[^\W_]+")
SNIPPET_CHARS = 160
"""About how much of a message a result shows around its first matched word."""


def words_of(text: str) -> tuple[str, ...]:
    """The distinct words of ``text``, lower-cased, in their first order."""
    return tuple(dict.fromkeys(word.lower() for word in _WORD.findall(text)))


def message_text(message: dict[str, Any]) -> str:
    """A message's text blocks (``text`` of each content block), one line each."""
    content = message.get("content")
    if not isinstance(content, list):
        return ""
    return "\n".join(
        block["text"]
        for block in content
        if isinstance(block, dict) and isinstance(block.get("text"), str)
    )


def snippet(words: tuple[str, ...], text: str) -> str | None:
    """The piece of ``text`` around its first word of ``words``, or None when ``text``
    lacks one of them."""
    found: dict[str, int] = {}
    for match in _WORD.finditer(text):
        word = match.group().lower()
        if word in words and word not in found:
            found[word] = match.start()
    if len(found) < len(words):
        return None
    first = min(found.values())
    start = max(0, first - SNIPPET_CHARS // 4)
    end = min(len(text), start + SNIPPET_CHARS)
    start = max(0, min(start, end - SNIPPET_CHARS))
    piece = " ".join(text[start:end].split())
    return ("…" if start > 0 else "") + piece + ("…" if end < len(text) else "")
