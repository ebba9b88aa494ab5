"""Logging for a library: records go to stdlib ``logging`` under ``sessionwire.*`` and
nowhere else unless the host configures logging (contract decision 21).

structlog's default prints to stdout, so library modules never use its global
configuration: ``library_logger`` wraps a stdlib logger, and the event's key-value pairs
travel as the record's ``extra``. A ``NullHandler`` on ``sessionwire`` keeps Python's
last-resort handler from printing warnings to stderr for a host that set nothing up. Our
CLI and servers attach their own handler (adapters/cli/context.py).
"""

from __future__ import annotations

import logging
from typing import Any

import structlog

ROOT_LOGGER = "sessionwire"

logging.getLogger(ROOT_LOGGER).addHandler(logging.NullHandler())


def library_logger(name: str) -> Any:
    """A structlog logger writing stdlib records to ``logging.getLogger(name)``."""
    return structlog.wrap_logger(
        logging.getLogger(name),
        processors=[structlog.stdlib.filter_by_level, structlog.stdlib.render_to_log_kwargs],
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
