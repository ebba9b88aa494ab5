"""The patterns that mask secrets in cross-session views: a corpus of real-looking
secrets (made up, in the shapes providers issue) that must be masked, look-alikes that
must stay, and inputs built to make a backtracking engine take exponential time."""

from __future__ import annotations

import pytest
import re2
from sessionwire.application.config.gateway_config import ConfigError, GatewayConfig
from sessionwire.domain.redaction import DEFAULT_PATTERNS, Redactor, redactor_for

PEM_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\nMzEfYyjiWA4R4"
SECRETS = {
    "sk-ant-api03-Qm9vZ2xlLWlzLW5vdC1hLXJlYWwta2V5LWF0LWFsbA-AbCdEf": "api-key",
    "sk-proj-4fJc9Lw2Xq7Rz1Tn8Vb3Kd6Hs0Pm5Ga": "api-key",
    "sk-3kF9wQ2xL7vB1nM8zR4tY6uP0aS5dG": "api-key",
    "AKIAIOSFODNN7EXAMPLE": "aws-access-key",
    "ghp_1A2b3C4d5E6f7G8h9I0j1K2l3M4n5O6p7Q8r": "github-token",
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz": "github-token",
    "xoxb-2048-4096-Zb8Qk2LmN4pR6sT8": "slack-token",
    "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY": "google-api-key",
    "sk_live_51H8xYzAbCdEfGhIjKlMnOpQr": "stripe-key",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9Pl": "jwt",
}
# The secret part of these is masked, the words around it stay.
IN_CONTEXT = [
    ("Authorization: Bearer 8f14e45fceea167a5a36dedd4bea2543", "Authorization: Bearer "),
    ("postgres://app:Tr0ub4dor-3@db.internal:5432/prod", "postgres://app:"),
    ("OPENAI_API_KEY=9a8b7c6d5e4f3a2b1c0d", "OPENAI_API_KEY="),
    ('{"password": "correct-horse-battery-9"}', '{"password": "'),
    ("db_password: Winter2026!x", "db_password: "),
]
LOOK_ALIKES = [
    "the token expired, ask for a new one",
    "password reset link sent",
    "scikit-learn is imported as sk-learn; see sk-12",
    "Bearer of bad news, I am",
    "the bearer token goes in a header",
    "AKIA is how AWS access key ids start",
    "commit 3f786850e387550fdab836ed7e6dc881de23001b fixed it",
    "id 8c3a7f4e-1111-4a1b-9c2d-000000000001",
    "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n"
    "-----END PUBLIC KEY-----",
    "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BA\n"
    "-----END CERTIFICATE-----",
    "https://example.com:8443/path?q=1",
    "email me at kev@example.com",
    "secret: yes",
    "tokens start with ghp_ and are 40 characters",
    "eyJ is how a base64 JSON object begins",
    "xoxb- prefixes a bot token",
    "a secret recipe; the password is long",
]

redactor = Redactor(DEFAULT_PATTERNS)


@pytest.mark.parametrize("secret", SECRETS)
def test_real_looking_secrets_are_masked(secret: str) -> None:
    masked = redactor.mask_text(f"here: {secret} (keep this)")
    assert masked == f"here: [redacted:{SECRETS[secret]}] (keep this)"


@pytest.mark.parametrize(("text", "kept"), IN_CONTEXT)
def test_only_the_secret_part_is_masked(text: str, kept: str) -> None:
    masked = redactor.mask_text(text)
    assert masked.startswith(kept)
    assert "[redacted:" in masked
    assert text[len(kept) :].split('"')[0].split("@")[0] not in masked


def test_a_private_key_is_masked_whole_even_cut_off() -> None:
    key = f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----"
    assert redactor.mask_text(f"key:\n{key}\nthanks") == "key:\n[redacted:private-key]\nthanks"
    cut = f"-----BEGIN OPENSSH PRIVATE KEY-----\n{PEM_BODY}"
    assert redactor.mask_text(f"key: {cut}") == "key: [redacted:private-key]"


@pytest.mark.parametrize("text", LOOK_ALIKES)
def test_look_alikes_stay(text: str) -> None:
    assert redactor.mask_text(text) == text


def test_a_message_is_masked_in_every_text_but_its_structure() -> None:
    message = {
        "role": "assistant",
        "timestamp": 1,
        "content": [
            {"type": "text", "text": "use AKIAIOSFODNN7EXAMPLE"},
            {
                "type": "toolCall",
                "id": "call_1",
                "name": "http",
                "arguments": {"headers": {"Authorization": "Bearer 8f14e45fceea167a5a36dedd"}},
            },
        ],
    }
    masked = redactor.mask(message)
    assert masked["content"][0]["text"] == "use [redacted:aws-access-key]"
    assert masked["content"][1]["arguments"]["headers"]["Authorization"] == (
        "Bearer [redacted:bearer-token]"
    )
    assert (masked["role"], masked["content"][1]["id"]) == ("assistant", "call_1")
    assert message["content"][0]["text"] == "use AKIAIOSFODNN7EXAMPLE"  # not changed in place


def test_configured_patterns_are_checked_when_the_config_loads() -> None:
    config = GatewayConfig.load({"redaction": {"patterns": [r"ACME-(?P<secret>\d{8})"]}})
    masker = config.redaction.redactor()
    assert masker is not None
    assert masker.mask_text("badge ACME-12345678") == "badge ACME-[redacted:configured]"
    assert masker.mask_text("sk-3kF9wQ2xL7vB1nM8zR4tY6uP0aS5dG") == "[redacted:api-key]"
    with pytest.raises(ConfigError, match=r"redaction\.patterns: .*not an RE2 pattern"):
        GatewayConfig.load({"redaction": {"patterns": [r"(a)\1"]}})
    assert GatewayConfig.load({"redaction": {"crossSession": False}}).redaction.redactor() is None
    only = GatewayConfig.load({"redaction": {"defaults": False, "patterns": ["ACME"]}})
    masker = only.redaction.redactor()
    assert masker is not None
    assert (
        masker.mask_text("AKIAIOSFODNN7EXAMPLE ACME")
        == "AKIAIOSFODNN7EXAMPLE [redacted:configured]"
    )


def test_matching_takes_linear_time_even_on_crafted_input() -> None:
    # Each of these takes a backtracking engine (Python's re) exponential or quadratic
    # time; RE2 scans each once. What makes it linear is the engine, so that is what is
    # asserted (a wall-clock bound would be a timed test, flaky on a loaded machine):
    # every pattern, the configured ones included, is compiled by RE2, never by re.
    masker = redactor_for((r"(a+)+$", r"(x|x)*y", r"(?:\w+\s?)*!"))
    engines = {type(pattern.regex) for pattern in masker._patterns}
    assert engines == {type(re2.compile("a"))}
    assert all(type(pattern.regex).__module__ == "re2" for pattern in masker._patterns)
    texts = [
        "a" * 200_000 + "!",
        "x" * 200_000,
        "word " * 40_000,
        "eyJ" * 70_000,
        "sk-" * 70_000,
        "Bearer " + "a" * 200_000 + " ",
        "-----BEGIN PRIVATE KEY-----" * 8_000,
        "password=" * 25_000,
        "postgres://u:" + "p" * 200_000,
    ]
    for text in texts:
        masker.mask_text(text)  # each returns (a backtracking engine would not, here)


def test_the_config_example_in_the_security_page_loads_and_masks() -> None:
    import re
    from pathlib import Path

    import json5

    page = Path(__file__).resolve().parents[2] / "docs" / "security.md"
    (block,) = re.findall(r"```json5\n(.*?)```", page.read_text(), re.DOTALL)
    config = GatewayConfig.load(json5.loads(block))
    masker = config.redaction.redactor()
    assert masker is not None
    assert masker.mask_text("ACME-12345678 badge=4711") == (
        "[redacted:configured] badge=[redacted:configured]"
    )


def test_a_short_string_is_masked_the_same_from_the_cache() -> None:
    # Short strings (a provenance kind, a key, a short secret) are cached by their text:
    # the second read of each must give what the first gave, secret or not.
    redactor = redactor_for(())
    texts = ["user", "OPENAI_API_KEY=9a8b7c6d5e4f3a2b1c0d", "user", "agent"]
    first = [redactor.mask(text) for text in texts]
    again = [redactor.mask(text) for text in texts]
    assert first == again
    assert first[1] != texts[1]
    assert "[redacted:" in first[1]
    assert first[0] == "user"
    assert first[3] == "agent"


def test_the_short_string_cache_stays_bounded() -> None:
    from sessionwire.domain import redaction

    redactor = Redactor(DEFAULT_PATTERNS)
    for number in range(redaction.SHORT_CACHE + 10):
        assert redactor.mask(f"text {number}") == f"text {number}"
    assert len(redactor._short) <= redaction.SHORT_CACHE
    assert redactor.mask("sk-3kF9wQ2xL7vB1nM8zR4tY6uP0aS5dG") == "[redacted:api-key]"
