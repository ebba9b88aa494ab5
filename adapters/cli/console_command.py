"""``sessionwire console``: the read-only web console alone, on loopback.

It opens the store alone (no gateway: nothing is resumed, run or delivered) and serves
the console's pages under ``/console``. Tokens are read as ``serve`` reads them; with
none given it makes a one-off operator token and prints a login link holding a one-time
code for it (never the token: an address is kept in browser history and access logs).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket

import click
import uvicorn
from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from sessionwire.adapters.access.auth import FailedAttempts
from sessionwire.adapters.access.tokens import TokenSet
from sessionwire.adapters.cli.context import EXIT_USAGE, CliOptions, configure_logging, fail
from sessionwire.adapters.cli.serve import (
    DEFAULT_TOKEN_ENV,
    is_loopback,
    log_format_option,
    read_tokens,
)
from sessionwire.adapters.console.app import create_console
from sessionwire.adapters.console.logins import CODE_SECONDS, ConsoleLogins
from sessionwire.adapters.store.off_loop import OffLoopStore

DEFAULT_CONSOLE_PORT = 8766
pass_options = click.make_pass_decorator(CliOptions)


@click.command("console")
@click.option("--host", default="127.0.0.1", show_default=True, help="a loopback address")
@click.option(
    "--port",
    default=DEFAULT_CONSOLE_PORT,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="port to listen on (0: any free port)",
)
@click.option(
    "--token-env",
    default=DEFAULT_TOKEN_ENV,
    show_default=True,
    help="environment variable holding the operator token",
)
@click.option("--token-file", default=None, help="file whose first line is the operator token")
@click.option("--tokens", "tokens_file", default=None, help="JSON or YAML file of tokens")
@log_format_option
@pass_options
def console_command(
    options: CliOptions,
    host: str,
    port: int,
    token_env: str,
    token_file: str | None,
    tokens_file: str | None,
    log_format: str,
) -> int:
    """Serve the read-only web console alone, on loopback (operator token required)."""
    configure_logging(options.verbose, log_format)
    if not is_loopback(host):
        fail(f"{host} is not a loopback address: beyond this machine use `serve`", EXIT_USAGE)
    one_off: str | None = None
    if tokens_file or token_file or os.environ.get(token_env, "").strip():
        tokens = read_tokens(tokens_file, token_env, token_file, host)
    else:
        one_off = secrets.token_urlsafe(32)
        tokens = TokenSet.operator(one_off)
    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError as error:
        fail(f"cannot listen on {host}:{port}: {error.strerror}", EXIT_USAGE)
    # Listening before the address is printed: a browser opened at once queues, not refused.
    listener.listen(128)
    bound = listener.getsockname()[1]
    with options.store_alone() as (store, config):
        app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
        logins = ConsoleLogins()
        app.mount(
            "/console",
            create_console(OffLoopStore(store), config, tokens, FailedAttempts(), logins),
        )

        @app.get("/", include_in_schema=False)
        async def home() -> RedirectResponse:
            return RedirectResponse("/console/")

        server = uvicorn.Server(
            uvicorn.Config(
                app,
                log_level="info" if options.verbose else "warning",
                access_log=options.verbose,
                lifespan="off",
                log_config=None,
            )
        )
        address = f"http://{host}:{bound}/console/"
        click.echo(f"sessionwire: console for {store.location} on {address}", err=True)
        if one_off is not None:
            # The link carries a one-time code, not the token: it logs in once.
            code = logins.invite(one_off)
            click.echo(
                f"sessionwire: open {address}login?code={code} (logs in once, within "
                f"{CODE_SECONDS // 60} minutes)",
                err=True,
            )
        # uvicorn stops on Ctrl+C, then re-raises it; stopping is the normal end.
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(server.serve(sockets=[listener]))
    return 0
