"""Rich renderings of tool results for people at a terminal (``--json`` skips these)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderableType
from rich.table import Table
from rich.text import Text


def when(millis: int | None) -> str:
    if millis is None:
        return "-"
    return datetime.fromtimestamp(millis / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content or [] if block.get("type") == "text")


class FittedToWidth:
    """A table laid out for the width it is printed at (a terminal's, or the piped
    width): narrow terminals get fewer or stacked columns instead of columns rich
    squeezes to nothing, keys folded over dozens of lines, or rows cut at the edge."""

    def __init__(self, build: Callable[[int], RenderableType]) -> None:
        self.build = build

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Any]:
        yield self.build(options.max_width)


# Narrower than this, the sessions table leaves out the update time and the tokens.
TABLE_WIDE = 100


def sessions_table(result: dict[str, Any], width: int | None = None) -> RenderableType:
    if width is None:
        return FittedToWidth(lambda fitted: sessions_table(result, fitted))
    wide = width >= TABLE_WIDE
    table = Table(title=f"{result['count']} session(s)", title_justify="left")
    longest_key = max((len(row["key"]) for row in result["sessions"]), default=3)
    # The key whole on one line when it fits beside the others; folded, never cut.
    table.add_column("KEY", overflow="fold", min_width=min(longest_key, 34))
    table.add_column("KIND")
    table.add_column("CHANNEL")
    if wide:
        table.add_column("UPDATED (UTC)")
        table.add_column("TOKENS", justify="right")
    # Only asked for (--message-limit) are rows given their messages: no empty column.
    shows_last = any("messages" in row for row in result["sessions"])
    if shows_last:
        table.add_column(
            "LAST MESSAGE", overflow="ellipsis", max_width=48 if wide else 24, no_wrap=True
        )
    for row in result["sessions"]:
        tokens = row.get("totalTokens")
        last = row.get("messages") or []
        cells = [row["key"], row["kind"], row.get("channel") or "-"]
        if wide:
            cells += [when(row.get("updatedAt")), "-" if tokens is None else str(tokens)]
        if shows_last:
            cells.append(" ".join(message_text(last[-1]).split()) if last else "")
        table.add_row(*cells)
    return table


def provenance_text(provenance: dict[str, Any] | None) -> str:
    """Who wrote a line and in which chain, short: ``a2a from KEY · trace 1a2b… run 3c4d…
    parent 5e6f… hop 2`` (empty fields left out)."""
    if not provenance:
        return ""
    parts = [provenance.get("kind", "?")]
    if provenance.get("sessionKey"):
        parts.append(f"from {provenance['sessionKey']}")
    chain = [
        f"{label} {provenance[name][:8]}"
        for label, name in (("trace", "traceId"), ("run", "runId"), ("parent", "parentRunId"))
        if provenance.get(name)
    ]
    if provenance.get("hops") is not None:
        chain.append(f"hop {provenance['hops']}")
    return " ".join(parts) + (" · " + " ".join(chain) if chain else "")


# The role column: the longest role (``toolResult``) and a space.
ROLE_WIDTH = len("toolResult") + 1
# Where a message's text starts: "  ", the time (19), "  ", the role.
TEXT_COLUMN = 2 + 19 + 2 + ROLE_WIDTH


def history_source(message: dict[str, Any]) -> str:
    """The provenance shown after a line; a tool's output is the tool's, not the agent's
    words, though the agent's run recorded it."""
    provenance = message.get("provenance")
    if message["role"] == "toolResult" and provenance:
        name = message.get("toolName")
        provenance = {**provenance, "kind": f"tool {name}" if name else "tool result"}
    return provenance_text(provenance)


def history_view(result: dict[str, Any]) -> RenderableType:
    lines: list[RenderableType] = [Text(f"history of {result['sessionKey']}:", style="bold")]
    for message in result["messages"]:
        line = Text(f"  {when(message.get('timestamp'))}  ")
        line.append(f"{message['role']:<{ROLE_WIDTH}}", style="cyan")
        # A multi-line message (a report) stays in its column, under its first line.
        line.append(("\n" + " " * TEXT_COLUMN).join(message_text(message).splitlines()))
        source = history_source(message)
        if source:
            # Who caused the line: the writer, its trace, its run, the run's cause, hop.
            line.append(f"  [{source}]", style="dim")
        lines.append(line)
    if result.get("droppedMessages"):
        lines.append(Text("  (the oldest messages left out: over the size cap)", style="dim"))
    if result.get("contentRedacted"):
        lines.append(Text("  (secrets masked)", style="dim"))
    if "nextOffset" in result:
        lines.append(
            Text(
                f"  ({result['totalMessages']} messages; older ones: --offset "
                f"{result['nextOffset']})",
                style="dim",
            )
        )
    return Group(*lines)


def agents_view(result: dict[str, Any]) -> RenderableType:
    # The title on a line of its own: as the table's title it wrapped to the table's width.
    title = Text(f"requester agent: {result['requester']} (any agent: {result['allowAny']})")
    table = Table()
    table.add_column("AGENT", no_wrap=True)
    table.add_column("NAME")
    table.add_column("CONFIGURED")
    for agent in result["agents"]:
        table.add_row(agent["id"], agent.get("name") or "", "yes" if agent["configured"] else "no")
    return Group(title, table)


def fork_view(result: dict[str, Any]) -> RenderableType:
    point = result["forkedFrom"]
    return Text(
        f"forked {point['sessionKey']} at version {point['version']} "
        f"({point['messages']} messages) into {result['sessionKey']}"
    )


def recorded_view(result: dict[str, Any]) -> RenderableType:
    return Text(f"recorded in {result['sessionKey']}")
