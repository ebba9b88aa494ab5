"""The console's logins (logins.py): random ids, an end after their lifetime, a bound."""

from __future__ import annotations

from sessionwire.adapters.console.logins import CODE_SECONDS, ConsoleLogins


class Ticking:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_login_lasts_its_lifetime_then_ends() -> None:
    clock = Ticking()
    logins = ConsoleLogins(lifetime=60, now=clock)
    login_id = logins.open("operator-token")
    assert logins.token_of(login_id) == "operator-token"
    clock.now = 59.9
    assert logins.token_of(login_id) == "operator-token"
    clock.now = 60
    assert logins.token_of(login_id) is None
    assert len(logins) == 0


def test_ids_are_random_and_unknown_ones_open_nothing() -> None:
    logins = ConsoleLogins()
    first, second = logins.open("t"), logins.open("t")
    assert first != second
    assert logins.token_of("t") is None
    assert logins.token_of(None) is None
    assert logins.token_of("") is None
    logins.close(first)
    assert logins.token_of(first) is None
    assert logins.token_of(second) == "t"


def test_the_oldest_login_goes_past_the_limit() -> None:
    logins = ConsoleLogins(limit=3)
    ids = [logins.open(f"t{n}") for n in range(4)]
    assert len(logins) == 3
    assert logins.token_of(ids[0]) is None
    assert [logins.token_of(i) for i in ids[1:]] == ["t1", "t2", "t3"]


def test_a_login_code_is_spent_once_and_expires() -> None:
    now = [0.0]
    logins = ConsoleLogins(now=lambda: now[0])
    code = logins.invite("operator-token")
    assert "operator-token" not in code
    assert logins.redeem(code) == "operator-token"
    assert logins.redeem(code) is None  # spent
    late = logins.invite("operator-token")
    now[0] = CODE_SECONDS
    assert logins.redeem(late) is None
