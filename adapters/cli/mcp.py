"""``sessionwire mcp``: serve the session tools to an MCP client, as one fixed session.

Over stdio (the default) the client starts this command itself; stdout carries the
protocol only, so every log line goes to stderr. ``--http`` serves the streamable HTTP
transport at ``http://HOST:PORT/mcp`` instead.
"""

from __future__ import annotations

from pathlib import Path

import click
from sessionwire.adapters.bootstrap import Gateway
from sessionwire.adapters.cli.context import (
    EXIT_OK,
    EXIT_USAGE,
    CliOptions,
    configure_logging,
    fail,
)
from sessionwire.adapters.cli.serve import DEFAULT_TOKEN_ENV, log_format_option, read_tokens
from sessionwire.adapters.mcp.runs import RunResources
from sessionwire.adapters.mcp.server import build_server, serve_http, serve_stdio
from sessionwire.adapters.runtimes.files import load_runtime
from sessionwire.adapters.runtimes.openai_compatible import OpenAIRuntime
from sessionwire.application.context import Requester
from sessionwire.application.gateway import GatewayService
from sessionwire.application.ports.runtime import AgentRuntime
from sessionwire.domain.keys import InvalidSessionKey

pass_options = click.make_pass_decorator(CliOptions)


@click.command("mcp")
@click.option(
    "--session",
    "requester",
    required=True,
    help="the session every tool call acts as (fixed for the server's life)",
)
@click.option("--http", is_flag=True, help="serve streamable HTTP instead of stdio")
@click.option("--host", default="127.0.0.1", show_default=True, help="with --http")
@click.option(
    "--port", default=8765, show_default=True, type=click.IntRange(1, 65535), help="with --http"
)
@click.option(
    "--runtime",
    "runtime_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="the agents' runtime: a ScriptedRuntime script or an OpenAI-compatible config "
    "(JSON or YAML)",
)
@click.option(
    "--token-env",
    default=DEFAULT_TOKEN_ENV,
    show_default=True,
    help="with --http: environment variable holding the (operator) bearer token",
)
@click.option("--token-file", default=None, help="with --http: file whose first line is the token")
@click.option(
    "--tokens",
    "tokens_file",
    default=None,
    help="with --http: JSON or YAML tokens file (operator, or bound to --session)",
)
@log_format_option
@pass_options
def mcp_command(
    options: CliOptions,
    requester: str,
    http: bool,
    host: str,
    port: int,
    runtime_file: Path | None,
    token_env: str,
    token_file: str | None,
    tokens_file: str | None,
    log_format: str,
) -> int:
    """Serve the session tools (sessions_*, agents_list, subagents, session_status)
    over MCP, every call made by the session --session.

    Over --http a bearer token is required, as for `serve`: an operator token or one bound
    to the --session session."""
    configure_logging(options.verbose, log_format)
    tokens = read_tokens(tokens_file, token_env, token_file, host) if http else None
    config = options.config()
    rules = config.key_rules
    try:
        acting = Requester.from_key(rules, requester)
    except InvalidSessionKey as error:
        fail(f"--session: {error}", EXIT_USAGE)

    def same_session(bound: str) -> bool:
        try:
            return Requester.from_key(rules, bound).key == acting.key
        except InvalidSessionKey:
            return False

    runtime: AgentRuntime | None = None
    if runtime_file is not None:
        try:
            runtime = load_runtime(runtime_file, config.http.egress)
        except ValueError as error:
            fail(str(error), EXIT_USAGE)

    async def work(gateway: GatewayService) -> int:
        if isinstance(runtime, OpenAIRuntime):
            # Its agents get their runs' session tools, before any resumed run starts.
            runtime.use_tools(gateway.call_tool)
        # Stateless streamable HTTP keeps no connection open to notify on: no
        # resources/subscribe there (a listen is its own stream, served on both).
        served = Gateway(gateway)
        runs = RunResources(served, requester)
        server = build_server(served, requester, subscriptions=tokens is None, runs=runs)
        if tokens is not None:
            await serve_http(
                server,
                host,
                port,
                tokens,
                requester,
                same_session,
                gateway.config.http,
                stopping=runs.close,
            )
        else:
            await serve_stdio(server)
        return EXIT_OK

    return options.run(work, runtime=runtime, config=config)
