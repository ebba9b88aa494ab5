"""The ``sessionwire`` command line: one module per command group, and its terminal views."""
