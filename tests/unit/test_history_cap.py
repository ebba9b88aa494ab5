"""sessions_history's 6 MiB cap: the shortcut for answers that cannot reach it (a
character is at most 4 bytes of UTF-8) keeps exactly what counting every byte keeps."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from sessionwire.application.tools.sessions_history import cap_bytes


def counted(texts: list[str], limit: int) -> list[str]:
    """cap_bytes as it was: every message's bytes counted."""
    sizes = [len(t.encode()) for t in texts]
    total = sum(sizes) + max(0, len(sizes) - 1) + 2
    start = 0
    while total > limit and start < len(texts) - 1:
        total -= sizes[start] + 1
        start += 1
    return texts[start:]


@settings(max_examples=300, deadline=None)
@given(
    texts=st.lists(st.text(alphabet=st.sampled_from('a{é€🙂"')), max_size=8),
    limit=st.integers(0, 80),
)
def test_the_cap_keeps_what_counting_every_byte_keeps(texts: list[str], limit: int) -> None:
    assert cap_bytes(texts, limit) == counted(texts, limit)
