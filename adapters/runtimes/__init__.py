"""Agent runtimes: scripted agents, OpenAI-compatible servers, and runtime files naming them."""
