"""Every example in the MCP, OpenAI-runtime, embedding and events pages runs as written.

A page's ```python blocks run in order in one namespace, in a fresh interpreter (the
pages' examples call ``asyncio.run`` and print, as a reader's script would); a page's
```json runtime files must load.
"""

from __future__ import annotations

import ast
import builtins
import json
import os
import re
import subprocess
import symtable
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from chat_server import ChatServer
from sessionwire.adapters.runtimes.files import load_runtime
from sessionwire.adapters.runtimes.openai_compatible import OpenAIRuntime
from sessionwire.adapters.runtimes.scripted import ScriptedRuntime

DOCS = Path(__file__).resolve().parents[2] / "docs"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks(page: str, language: str) -> list[str]:
    text = (DOCS / page).read_text(encoding="utf-8")
    return [body for lang, body in FENCE.findall(text) if lang == language]


def run_python(page: str, env: dict[str, str] | None = None) -> str:
    code = "\n\n".join(blocks(page, "python"))
    assert code, f"{page} has no python example"
    # The console script `sessionwire` sits beside this interpreter.
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PATH": path, **(env or {})},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    with ChatServer().running() as server:
        yield server


def test_embedding_examples_run() -> None:
    out = run_python("embedding.md")
    assert "[webchat -> user:42] Status: ok" in out
    assert "accepted True" in out
    assert "ok Ticket opened for: printer on fire" in out
    assert "to slack:channel:ops: Ops: a ticket was opened." in out
    assert "['agent:main:slack:channel:ops', 'main']" in out
    assert "accepted error True" in out  # the busy policy's example
    assert "started refused" in out  # what became of its two messages
    assert "pages [200, 200, 100] first m0 total 500" in out  # paging back
    assert "accepted cancelled" in out
    assert "run subagent_task ok True" in out
    assert "trace ['subagent_announce', 'subagent_task']" in out
    assert "unknown None" in out
    assert "cancel ok False the run had already ended (ok)" in out


def test_events_examples_run_and_print_what_the_page_shows() -> None:
    out = run_python("events.md")
    shown = "".join(blocks("events.md", "text"))
    assert out == shown


def test_mcp_examples_run() -> None:
    out = run_python("mcp.md")
    assert "revision 2026-07-28" in out  # the SDK's Client takes the stateless revision
    assert "['sessions_list', 'sessions_history', 'sessions_search', 'sessions_send', " in out
    assert "False hello" in out
    assert "True Session not found: cron:nope" in out
    assert "followed over HTTP: ok" in out  # a listen over --http
    assert "asked: Deploy build 42? ['yes', 'no']" in out  # a run that asks elicits
    assert "answered: accepted" in out


def test_openai_runtime_examples_run(chat_server: ChatServer) -> None:
    out = run_python("openai-runtime.md", env={"CHAT_BASE_URL": chat_server.base_url})
    assert "ok echo: how is the deploy going?" in out
    assert chat_server.received[0].body["model"] == "llama3.2"


@pytest.mark.parametrize("page", ["mcp.md", "openai-runtime.md"])
def test_runtime_files_in_the_docs_load(
    page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-docs")
    files = [body for body in blocks(page, "json") if '"openai"' in body or '"rules"' in body]
    assert files, f"{page} shows no runtime file"
    for number, body in enumerate(files):
        path = tmp_path / f"runtime{number}.json"
        path.write_text(body)
        expected = OpenAIRuntime if "openai" in json.loads(body) else ScriptedRuntime
        assert isinstance(load_runtime(path), expected)


def test_a2a_examples_run_and_print_what_the_page_shows() -> None:
    out = run_python("a2a.md")
    shown = "".join(blocks("a2a.md", "text"))
    assert out == shown


def _unbound_names(code: str) -> set[str]:
    """Names ``code`` reads that it never binds (imports, assignments, definitions, at
    any depth) and that are not builtins: what it needs from elsewhere to run."""
    table = symtable.symtable(code, "<block>", "exec")

    def read(scope: symtable.SymbolTable, top: bool) -> set[str]:
        found = {
            symbol.get_name()
            for symbol in scope.get_symbols()
            if symbol.is_referenced()
            and (
                not (symbol.is_assigned() or symbol.is_imported() or symbol.is_parameter())
                if top
                else symbol.is_global()
            )
        }
        for child in scope.get_children():
            found |= read(child, False)
        return found

    bound = {
        symbol.get_name()
        for symbol in table.get_symbols()
        if symbol.is_assigned() or symbol.is_imported() or symbol.is_namespace()
    }
    return read(table, True) - bound - set(dir(builtins))


def _imported(code: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
    return names


PAGES = ["../README.md", *sorted(path.name for path in DOCS.glob("*.md"))]


@pytest.mark.parametrize("page", PAGES)
def test_each_python_block_runs_as_a_file_with_its_own_imports(page: str) -> None:
    # Pasted into a file, a block must compile (no top-level await) and import what it
    # uses: a name an earlier block imported is a NameError in a block copied alone.
    # (A block may use values an earlier block made, as the page's next step.)
    imported_before: set[str] = set()
    for number, code in enumerate(blocks(page, "python")):
        compile(code, f"{page} block {number}", "exec")
        missing = _unbound_names(code) & imported_before
        assert not missing, f"{page} block {number} needs the imports of {sorted(missing)}"
        imported_before |= _imported(code)


def test_the_readme_blocks_run_alone(tmp_path: Path) -> None:
    for number, code in enumerate(blocks("../README.md", "python")):
        code = code.replace("sqlite:///tmp/sessions.db", f"sqlite:///{tmp_path}/sessions.db")
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 0, f"block {number}: {done.stderr}"
    assert (tmp_path / "sessions.db").exists()


def test_fork_examples_run_and_print_what_the_page_shows() -> None:
    out = run_python("fork.md")
    shown = "".join(blocks("fork.md", "text"))
    assert out == shown
    (spawn_call,) = blocks("fork.md", "json")
    assert json.loads(spawn_call)["context"] == "fork"
