"""What every transport checks before it serves (ADR 0043): bearer tokens and their
grants, the Gatekeeper, the failed-attempt limit, the one error shape, the request
rules and the header deadline. HTTP, MCP, A2A and the console import it; none imports
another transport for it."""
