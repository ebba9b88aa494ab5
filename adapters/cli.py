"""The ``sessionwire`` command line: record messages, list sessions, read histories.

The store defaults to an SQLite file in the user's data directory; ``--store`` or the
SESSIONWIRE_STORE environment variable picks another ('memory', 'sqlite:///…',
'postgresql://…').
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog
from sessionwire.adapters.bootstrap import Gateway
from sessionwire.adapters.event_store import StoreURLError
from sessionwire.application.config import ConfigError, GatewayConfig

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2


def default_store() -> str:
    env = os.environ.get("SESSIONWIRE_STORE")
    if env:
        return env
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return f"sqlite:///{base / 'sessionwire' / 'sessions.db'}"


def configure_logging(verbose: bool) -> None:
    level = logging.DEBUG if verbose else logging.WARNING
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sessionwire", description=__doc__)
    parser.add_argument("--store", default=None, help="store URL (default: %(default)s)")
    parser.add_argument("--config", default=None, help="OpenClaw-shaped JSON5 config file")
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what happens")
    commands = parser.add_subparsers(dest="command", required=True)

    record = commands.add_parser("record", help="record one message into a session")
    record.add_argument("session", help="session key, e.g. main or discord:group:dev")
    record.add_argument("message", help="message text")
    record.add_argument("--role", default="user", choices=["user", "assistant", "toolResult"])
    record.add_argument("--channel")
    record.add_argument("--chat-type", choices=["direct", "dm", "group", "channel"])
    record.add_argument("--display-name")
    record.add_argument("--to")
    record.add_argument("--label")

    sessions = commands.add_parser("sessions", help="list sessions or read one's history")
    session_commands = sessions.add_subparsers(dest="sessions_command", required=True)
    listing = session_commands.add_parser("list", help="sessions, newest first")
    listing.add_argument("--as", dest="requester", default="main", help="requester session")
    listing.add_argument("--limit", type=float)
    listing.add_argument("--kinds", nargs="*")
    listing.add_argument("--active-minutes", type=float)
    listing.add_argument("--message-limit", type=float)
    history = session_commands.add_parser("history", help="one session's messages")
    history.add_argument("session", help="session key or sessionId")
    history.add_argument("--as", dest="requester", default="main", help="requester session")
    history.add_argument("--limit", type=float)
    history.add_argument("--include-tools", action="store_true")

    agents = commands.add_parser("agents", help="agents a session may spawn into")
    agent_commands = agents.add_subparsers(dest="agents_command", required=True)
    agents_listing = agent_commands.add_parser("list")
    agents_listing.add_argument("--as", dest="requester", default="main")

    commands.add_parser("demo", help="record a short conversation and show it (the main job)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(args.verbose)
    store = args.store or default_store()
    try:
        config = GatewayConfig.load(args.config)
        return asyncio.run(run(args, config, store))
    except (ConfigError, StoreURLError) as error:
        print(f"sessionwire: {error}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as error:
        print(f"sessionwire: {error}", file=sys.stderr)
        return EXIT_REFUSED


async def run(args: argparse.Namespace, config: GatewayConfig, store: str) -> int:
    if store.startswith("sqlite:"):
        _make_parent(store)
    gateway = await Gateway.open(config=config, store=store)
    try:
        if args.command == "record":
            recorded = await gateway.record_message(
                args.session,
                role=args.role,
                content=args.message,
                channel=args.channel,
                chat_type=args.chat_type,
                display_name=args.display_name,
                to=args.to,
                label=args.label,
            )
            return show(args, recorded, lambda r: f"recorded in {r['sessionKey']}")
        if args.command == "demo":
            return await demo(args, gateway)
        if args.command == "sessions" and args.sessions_command == "list":
            params = _params(
                limit=args.limit,
                kinds=args.kinds,
                activeMinutes=args.active_minutes,
                messageLimit=args.message_limit,
            )
            result = await gateway.call_tool(args.requester, "sessions_list", params)
            return show(args, result, sessions_table)
        if args.command == "sessions":
            params = _params(sessionKey=args.session, limit=args.limit)
            if args.include_tools:
                params["includeTools"] = True
            result = await gateway.call_tool(args.requester, "sessions_history", params)
            return show(args, result, history_text)
        result = await gateway.call_tool(args.requester, "agents_list", {})
        return show(args, result, agents_text)
    finally:
        await gateway.close()


async def demo(args: argparse.Namespace, gateway: Any) -> int:
    """Record a short two-session conversation, then list and read it back."""
    script = [
        ("main", "user", "Can you check on the deploy?", {"channel": "webchat"}),
        ("main", "assistant", "On it: I'll ask the ops channel.", {}),
        (
            "discord:group:ops",
            "user",
            "Deploy 42 finished green.",
            {"channel": "discord", "chat_type": "group", "display_name": "#ops"},
        ),
        ("main", "assistant", "Deploy 42 is live and green.", {}),
    ]
    for key, role, text, route in script:
        await gateway.record_message(key, role=role, content=text, **route)
        if not args.json:
            print(f"recorded  {key:<22} {role:<9} {text}")
    listed = await gateway.call_tool("main", "sessions_list", {"messageLimit": 1})
    history = await gateway.call_tool("main", "sessions_history", {"sessionKey": "main"})
    if args.json:
        print(json.dumps({"sessions": listed, "history": history}, indent=2))
        return EXIT_OK
    print()
    print(sessions_table(listed))
    print()
    print(history_text(history))
    print(f"\nstore: {gateway.store.location}")
    return EXIT_OK


def _make_parent(store: str) -> None:
    raw = store[len("sqlite:") :]
    path = Path("/" + raw.lstrip("/") if raw.startswith("//") else raw).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)


def _params(**values: Any) -> dict[str, Any]:
    return {name: value for name, value in values.items() if value is not None}


def show(args: argparse.Namespace, result: dict[str, Any], render: Any) -> int:
    refused = result.get("status") in {"error", "forbidden"}
    if args.json:
        print(json.dumps(result, indent=2))
    elif refused:
        print(f"sessionwire: {result['status']}: {result['error']}", file=sys.stderr)
    else:
        print(render(result))
    return EXIT_REFUSED if refused else EXIT_OK


def _when(millis: int) -> str:
    return datetime.fromtimestamp(millis / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def sessions_table(result: dict[str, Any]) -> str:
    header = f"{'KEY':<32} {'KIND':<6} {'CHANNEL':<9} {'UPDATED (UTC)':<19} TOKENS"
    lines = [header]
    for row in result["sessions"]:
        tokens = row["totalTokens"] if row["totalTokens"] is not None else "-"
        lines.append(
            f"{row['key']:<32} {row['kind']:<6} {row['channel']:<9} "
            f"{_when(row['updatedAt']):<19} {tokens}"
        )
    lines.append(f"{result['count']} session(s)")
    return "\n".join(lines)


def history_text(result: dict[str, Any]) -> str:
    lines = [f"history of {result['sessionKey']}:"]
    for message in result["messages"]:
        text = "".join(b.get("text", "") for b in message["content"] if b.get("type") == "text")
        lines.append(f"  {_when(message['timestamp'])}  {message['role']:<9} {text}")
    return "\n".join(lines)


def agents_text(result: dict[str, Any]) -> str:
    lines = [f"requester agent: {result['requester']} (any agent: {result['allowAny']})"]
    for agent in result["agents"]:
        state = "configured" if agent["configured"] else "not configured"
        lines.append(f"  {agent['id']:<16} {agent.get('name') or '':<16} {state}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
