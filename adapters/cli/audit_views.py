"""Rich renderings of the audit answers (a timeline, a past state) for people."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from rich.tree import Tree
from sessionwire.adapters.cli.terminal_views import FittedToWidth, message_text, when

KIND_STYLES = {
    "session": "cyan",
    "run": "green",
    "exchange": "magenta",
    "spawn": "yellow",
    "refusal": "red",
    "delivery": "blue",
    "busy": "bright_red",
    "yield": "bright_green",
    "remote_call": "bright_cyan",
    "push": "bright_blue",
    "schedule": "bright_magenta",
}


# At least this wide, an event is one line of six columns; narrower, four columns with
# the event's name over its stream and its time over its chain, so what happened keeps
# room to be read (rich squeezed the other columns to nothing at 80).
TIMELINE_WIDE = 140


def timeline_view(result: dict[str, Any], width: int | None = None) -> RenderableType:
    if width is None:
        return FittedToWidth(lambda fitted: timeline_view(result, fitted))
    entries = result["entries"]
    table = Table(
        title=f"timeline of {result['key']}: {len(entries)} event(s)", title_justify="left"
    )
    if width < TIMELINE_WIDE:
        table.add_column("#", justify="right", no_wrap=True)
        table.add_column("TIME (UTC)\nTRACE/PARENT/HOP", no_wrap=True, overflow="ellipsis")
        table.add_column("EVENT\nKIND", no_wrap=True, overflow="ellipsis")
        table.add_column("WHAT HAPPENED", overflow="fold", min_width=20, ratio=1)
        for entry in entries:
            time = Text(entry["timestamp"][:19].replace("T", " "))
            chain = chain_cell(entry, compact=True)
            table.add_row(
                str(entry["position"]),
                time.append("\n").append_text(chain) if chain else time,
                Text(entry["event"]).append("\n").append_text(kind_cell(entry)),
                Text(entry["summary"]),
            )
        return table
    table.add_column("#", justify="right")
    table.add_column("TIME (UTC)", no_wrap=True)
    table.add_column("KIND")
    table.add_column("EVENT", no_wrap=True)
    table.add_column("WHAT HAPPENED")
    table.add_column("TRACE / PARENT / HOP", no_wrap=True)
    for entry in entries:
        table.add_row(
            str(entry["position"]),
            entry["timestamp"][:23].replace("T", " "),
            kind_cell(entry),
            entry["event"],
            # Text, not a str: recorded text is shown as it is, never read as markup.
            Text(entry["summary"]),
            chain_cell(entry),
        )
    return table


def kind_cell(entry: dict[str, Any]) -> Text:
    return Text(f"{entry['kind']} {entry['aggregate_id'][:8]}", style=KIND_STYLES[entry["kind"]])


def chain_cell(entry: dict[str, Any], compact: bool = False) -> Text:
    """The chain an event belongs to, shortened: trace, the run that caused it, its hop."""
    trace = entry.get("trace_id")
    if not trace:
        return Text("")
    parent = entry.get("parent_run_id")
    hops = entry.get("hops")
    parts = [trace[:8], parent[:8] if parent else "-", str(hops) if hops is not None else "-"]
    return Text(("/" if compact else " / ").join(parts), style="dim")


def trace_view(result: dict[str, Any]) -> RenderableType:
    """The trace as a tree: each stream under the one that caused it, with its events."""
    nodes = result["nodes"]
    root = Tree(Text(f"trace {result['trace_id']}: {len(nodes)} stream(s)", style="bold"))
    branches: dict[str | None, Tree] = {None: root}
    for node in nodes:
        label = Text(f"{node['kind']} {node['id'][:8]}", style=KIND_STYLES[node["kind"]])
        hop = f" hop {node['hops']}" if node.get("hops") is not None else ""
        label.append(f"  {node['session_key']}{hop}", style="dim")
        branch = branches.get(node["parent_id"], root).add(label)
        for entry in node["entries"]:
            line = Text(f"#{entry['position']} {entry['timestamp'][11:23]}  ", style="dim")
            line.append(entry["summary"])  # recorded text, never markup
            branch.add(line)
        branches[node["id"]] = branch
    return root


ROW_FIELDS = (
    "status",
    "session_id",
    "agent_id",
    "spawned_by",
    "message_count",
    "channel",
    "chat_type",
    "display_name",
    "label",
    "last_channel",
    "last_to",
    "model",
    "total_tokens",
    "send_policy",
    "busy_policy",
)


def state_view(result: dict[str, Any]) -> RenderableType:
    row = result["row"]
    title = Text(
        f"{result['key']} at version {result['version']} of {result['latest_version']} "
        f"(recorded {result['recorded_at']})",
        style="bold",
    )
    fields = Table(show_header=False, box=None, padding=(0, 2))
    for name in ROW_FIELDS:
        if row.get(name) is not None:
            fields.add_row(name, Text(str(row[name])))
    fields.add_row("updated_at", when(row["updated_at"]))
    lines: list[RenderableType] = [title, fields, Text("transcript:", style="bold")]
    for message in result["transcript"]:
        line = Text(f"  {when(message.get('timestamp'))}  ")
        line.append(f"{message['role']:<10}", style="cyan")
        line.append(message_text(message))
        lines.append(line)
    if not result["transcript"]:
        lines.append(Text("  (no messages yet)", style="dim"))
    return Group(*lines)
