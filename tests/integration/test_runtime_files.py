"""Runtime files for the command line: a script or an OpenAI-compatible config."""

from __future__ import annotations

from pathlib import Path

import pytest
from sessionwire.adapters.runtimes.files import load_runtime
from sessionwire.adapters.runtimes.openai_compatible import OpenAIRuntime
from sessionwire.testing import ScriptedRuntime


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_an_openai_section_builds_the_openai_runtime(tmp_path: Path) -> None:
    path = write(
        tmp_path, "agents.yaml", "openai:\n  baseUrl: http://127.0.0.1:8080/v1\n  model: qwen\n"
    )
    runtime = load_runtime(path)
    assert isinstance(runtime, OpenAIRuntime)
    assert runtime.config.endpoint == "http://127.0.0.1:8080/v1/chat/completions"
    assert runtime.config.model == "qwen"


def test_rules_build_a_scripted_runtime(tmp_path: Path) -> None:
    runtime = load_runtime(write(tmp_path, "agents.json", '{"rules": [{"reply": "ok"}]}'))
    assert isinstance(runtime, ScriptedRuntime)
    assert [rule.reply for rule in runtime.rules] == ["ok"]


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("a.json", '{"agents": []}', "must hold either 'rules' (a script) or 'openai'"),
        ("a.json", "{not json", "cannot be parsed"),
        ("a.yaml", "openai:\n  model: m\n", "invalid openai config: baseUrl: Field required"),
        ("a.json", '{"rules": [{"step": "nope"}]}', "invalid script"),
    ],
)
def test_a_file_that_describes_no_runtime_says_why(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_runtime(write(tmp_path, name, text))
