"""``sessionwire serve``: the HTTP gateway (docs/http.md) on the chosen store.

Tokens (docs/security.md): ``--tokens FILE`` binds each token to one session or to the
operator role; without it, the one token of ``$SESSIONWIRE_TOKEN`` or ``--token-file`` is
an operator token. Beyond loopback every token must be at least ``MIN_TOKEN_LENGTH``
characters: one given in clear is checked at start, a ``tokenSha256`` one when presented.

Exit codes: 0 stopped (Ctrl+C), 2 bad usage (no token, a bad tokens or runtime file, a
store that cannot be opened, is damaged, or is an SQLite file another live gateway
holds), 3 cannot listen (the port is taken, or the address is not
this machine's).
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import uvicorn
from sessionwire.adapters.access.auth import MAX_BODY_BYTES
from sessionwire.adapters.access.header_deadline import header_deadline
from sessionwire.adapters.access.tokens import MIN_TOKEN_LENGTH, TokenFileError, TokenSet
from sessionwire.adapters.bootstrap import Gateway
from sessionwire.adapters.cli.checkpoint_key import (
    KEY_ENV,
    event_cursor_key,
    key_configured,
    key_path,
    load_or_create_key,
)
from sessionwire.adapters.cli.context import (
    EXIT_USAGE,
    LOG_FORMATS,
    CliOptions,
    configure_logging,
    fail,
)
from sessionwire.adapters.cli.runtime_option import (
    chosen_runtime,
    connect_runtime,
    runtime_option,
)
from sessionwire.adapters.http.app import create_app
from sessionwire.adapters.store.damage import damaged_store_text, sqlite_file_damage
from sessionwire.adapters.store.off_loop import OffLoopStore
from sessionwire.adapters.store.sqlite import sqlite_file
from sessionwire.adapters.telemetry.prometheus import PrometheusTelemetry
from sessionwire.application.gateway import GatewayService
from sessionwire.application.ports.store import StoreInUse
from sessionwire.application.ports.telemetry import combined

DEFAULT_PORT = 8765
# uvicorn's own code for a server that could not start; kept, so scripts see one code.
EXIT_CANNOT_LISTEN = 3
DEFAULT_TOKEN_ENV = "SESSIONWIRE_TOKEN"
# A connection idle this long between requests is closed.
IDLE_TIMEOUT_SECONDS = 5
# Event streams (GET /v1/events) hold a connection each while they are open.
MAX_CONNECTIONS = 2_000

pass_options = click.make_pass_decorator(CliOptions)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_token(token_env: str, token_file: str | None) -> str:
    """The bearer token: the file's first line if a file is given, else the variable."""
    if token_file is not None:
        try:
            lines = Path(token_file).expanduser().read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as error:
            fail(f"cannot read the token file: {error}", EXIT_USAGE)
        token = lines[0].strip() if lines else ""
        if not token:
            fail(f"the token file {token_file} is empty", EXIT_USAGE)
        return token
    token = os.environ.get(token_env, "").strip()
    if not token:
        fail(f"no token: set ${token_env} or pass --token-file", EXIT_USAGE)
    return token


def read_tokens(
    tokens_file: str | None, token_env: str, token_file: str | None, host: str
) -> TokenSet:
    """The accepted tokens; beyond loopback, none given in clear may be short."""
    try:
        if tokens_file is not None:
            tokens = TokenSet.from_file(tokens_file)
        else:
            tokens = TokenSet.operator(read_token(token_env, token_file))
    except TokenFileError as error:
        fail(str(error), EXIT_USAGE)
    short = tokens.shortest_clear
    if not is_loopback(host) and short is not None and short < MIN_TOKEN_LENGTH:
        fail(
            f"a token of {short} characters on {host}: beyond loopback every token must have "
            f"at least {MIN_TOKEN_LENGTH} (e.g. `python -c 'import secrets; "
            f"print(secrets.token_urlsafe(32))'`)",
            EXIT_USAGE,
        )
    # A tokenSha256 entry has no length to check now: its token is checked when presented.
    return tokens if is_loopback(host) else tokens.requiring(MIN_TOKEN_LENGTH)


def log_format_option(command: Any) -> Any:
    return click.option(
        "--log-format",
        type=click.Choice(LOG_FORMATS),
        default="console",
        show_default=True,
        help="logs on stderr: for people (console) or one JSON object a line (json)",
    )(command)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="address to listen on")
@click.option(
    "--port",
    default=DEFAULT_PORT,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="port to listen on (0: any free port)",
)
@click.option(
    "--token-env",
    default=DEFAULT_TOKEN_ENV,
    show_default=True,
    help="environment variable holding the bearer token",
)
@click.option(
    "--token-file", default=None, help="file whose first line is the (operator) bearer token"
)
@click.option(
    "--tokens",
    "tokens_file",
    default=None,
    help="JSON or YAML file of tokens, each bound to one session or the operator role",
)
@click.option(
    "--max-body-bytes",
    default=MAX_BODY_BYTES,
    show_default=True,
    type=click.IntRange(1),
    help="larger request bodies get 413",
)
@click.option(
    "--otel",
    is_flag=True,
    help="export OpenTelemetry spans over OTLP/HTTP (OTEL_* variables; needs sessionwire[otel])",
)
@click.option(
    "--a2a",
    is_flag=True,
    help="also serve each configured agent over the A2A protocol under /a2a/<agentId> "
    "(docs/a2a.md)",
)
@click.option(
    "--public-url",
    default=None,
    help="the base URL clients reach this server by: the A2A Agent Cards name it, and are "
    "signed only for it (without it a card names the URL of each request, unsigned)",
)
@click.option(
    "--checkpoint-key",
    "checkpoint_key",
    default=None,
    help="with --a2a: sign the Agent Cards with this checkpoint key (ADR 0016) if it exists; "
    f"default: ${KEY_ENV} or the default key file, when there is one",
)
@runtime_option
@log_format_option
@pass_options
def serve(
    options: CliOptions,
    host: str,
    port: int,
    token_env: str,
    token_file: str | None,
    tokens_file: str | None,
    max_body_bytes: int,
    otel: bool,
    a2a: bool,
    public_url: str | None,
    checkpoint_key: str | None,
    runtime_file: Path | None,
    log_format: str,
) -> int:
    """Serve the session tools and gateway methods over HTTP (bearer token required).

    Without --runtime the gateway has no agent runtime: runs that sessions_send or
    sessions_spawn start end in an error saying so.
    """
    configure_logging(options.verbose, log_format)
    tokens = read_tokens(tokens_file, token_env, token_file, host)
    config = options.config()
    # Every outbound request (runtimes, pushes) is fenced by http.egress (ADR 0040).
    runtime = chosen_runtime(runtime_file, config.http.egress)
    metrics = PrometheusTelemetry()
    spans = otel_spans() if otel else None
    open_kwargs: dict[str, Any] = {"config": config}
    signing_key = None
    if a2a:
        from sessionwire.adapters.a2a.push import A2APushDelivery
        from sessionwire.application.ports.runtime import RecordedDelivery

        # Push notifications go out through the outbox; other deliveries are recorded.
        open_kwargs["delivery"] = A2APushDelivery(RecordedDelivery(), config.http.egress)
        if key_configured(checkpoint_key):
            signing_key, _ = load_or_create_key(key_path(checkpoint_key))
            if public_url is None:
                click.echo(
                    "sessionwire: note: the Agent Cards are not signed without --public-url "
                    "(a card is signed only for the URL configured, ADR 0040)",
                    err=True,
                )

    async def work(gateway: GatewayService) -> int:
        # A server writes (its tools and methods do): beside an SQLite file's live writer
        # it would answer every write with a refusal, so it does not start (decision 20).
        # Without a runtime it resumes nothing, but it holds the file all the same.
        try:
            if isinstance(gateway.store, OffLoopStore):
                gateway.store.event_store.hold_writer()
        except StoreInUse as held:
            fail(f"cannot serve: {held}", EXIT_USAGE)
        # A damaged file would open and then answer requests with a DatabaseError: every
        # page is read once here, before the port opens.
        if options.store.startswith("sqlite:"):
            damage = await asyncio.to_thread(sqlite_file_damage, sqlite_file(options.store))
            if damage is not None:
                fail(f"cannot serve: {damaged_store_text(options.store, damage)}", EXIT_USAGE)
        connect_runtime(runtime, gateway)
        # Session-bound subscribers' event ids are sealed with a kept secret, so they
        # resume across restarts (docs/http.md); only made where such tokens exist.
        bound = any(not grant.is_operator for _, grant in tokens.entries)
        app = create_app(
            Gateway(gateway),
            tokens,
            max_body_bytes=max_body_bytes,
            metrics=metrics,
            cursor_secret=event_cursor_key() if bound else None,
            a2a=a2a,
            a2a_signing_key=signing_key,
            public_url=public_url,
        )
        # The gateway's tasks live on this event loop, so uvicorn serves on it too.
        server = _ListeningServer(
            f"http://{host}:{port}",
            gateway.end_subscriptions,
            uvicorn.Config(
                app,
                host=host,
                port=port,
                log_level="info" if options.verbose else "warning",
                access_log=options.verbose,
                lifespan="off",
                # uvicorn's own loggers propagate to ours (stderr, --log-format).
                log_config=None,
                timeout_keep_alive=IDLE_TIMEOUT_SECONDS,
                limit_concurrency=MAX_CONNECTIONS,
                # Headers sent byte by byte, forever, would hold a connection forever.
                http=header_deadline(),
                # Client addresses come from forwarding headers only behind
                # http.trustedProxies (the Gatekeeper reads them); uvicorn's trusts loopback.
                proxy_headers=False,
            ),
        )
        click.echo(
            f"sessionwire: serving {gateway.store.location} on http://{host}:{port}", err=True
        )
        if not is_loopback(host):
            click.echo(
                "sessionwire: warning: listening beyond this machine; the tokens are all "
                "that guard the sessions (put TLS in front)",
                err=True,
            )
        await server.serve()
        return 0

    try:
        return options.run(work, runtime=runtime, telemetry=combined(metrics, spans), **open_kwargs)
    except KeyboardInterrupt:
        # uvicorn shuts down on Ctrl+C, then re-raises it; stopping is the normal end.
        return 0
    finally:
        if spans is not None:
            spans.shutdown()


def otel_spans() -> Any:
    """``--otel``: spans over OTLP, or a clear exit 2 without the extra installed (the
    API alone may be there: FastAPI brings it; the SDK and the exporter come with it)."""
    try:
        from sessionwire.adapters.telemetry.otel import otlp_telemetry

        return otlp_telemetry()
    except ImportError:
        fail(
            "--otel needs the OpenTelemetry SDK and OTLP exporter: pip install 'sessionwire[otel]'",
            EXIT_USAGE,
        )


# The line on stderr that says the server accepts connections.
LISTENING = "sessionwire: listening on"


class _ListeningServer(uvicorn.Server):
    """uvicorn that says on stderr when its port is open (what a supervisor or a test
    waits for, instead of polling)."""

    def __init__(self, url: str, stopping: Callable[[], None], config: uvicorn.Config) -> None:
        super().__init__(config)
        self.url = url
        self.stopping = stopping

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # uvicorn waits for every response to end; an event stream ends only when its
        # subscription does.
        self.stopping()
        await super().shutdown(sockets=sockets)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets=sockets)
        except SystemExit:
            # uvicorn logs the OS's reason (the line above) and exits when it cannot bind.
            fail(
                f"cannot listen on {self.url}: the port is taken or the address is not "
                "this machine's (see the error above); choose another with --port or --host",
                EXIT_CANNOT_LISTEN,
            )
        if self.started:
            click.echo(f"{LISTENING} {self.url}", err=True)
