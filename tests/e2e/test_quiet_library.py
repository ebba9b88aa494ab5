"""A library is quiet (contract decision 21; issue 16, finding 10).

An embedding script that follows the README prints nothing of ours on stdout or stderr;
once the host configures ``logging`` our records reach its handlers.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import asyncio
    {setup}
    from sessionwire import Gateway
    from sessionwire.testing import ScriptedRuntime

    async def main() -> None:
        runtime = ScriptedRuntime.from_dict({{"rules": [{{"reply": "REPLY_SKIP"}}]}})
        gateway = await Gateway.open(store="memory", runtime=runtime)
        await gateway.record_message("main", role="user", content="hi")
        await gateway.record_message("cron:job", role="user", content="hi")
        await gateway.call_tool("main", "sessions_send",
                                {{"sessionKey": "cron:job", "message": "hello"}})
        await gateway.call_tool("main", "sessions_history", {{"sessionKey": "nowhere:x"}})
        await gateway.call_tool("main", "no_such_tool", {{}})
        await gateway.close()

    asyncio.run(main())
    """
)


def run(setup: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT.format(setup=setup)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


def test_the_library_prints_nothing_unless_the_host_configures_logging() -> None:
    done = run(setup="")
    assert done.stdout == ""
    assert done.stderr == ""


def test_a_host_that_configures_logging_gets_our_records_on_its_handler() -> None:
    done = run(
        setup="import logging, sys\n"
        "logging.basicConfig(level=logging.DEBUG, stream=sys.stderr, format='%(name)s %(message)s')"
    )
    assert done.stdout == ""
    assert "sessionwire.gateway" in done.stderr
