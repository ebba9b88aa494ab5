"""The HTTP gateway (FastAPI): the tools and gateway methods over JSON."""
