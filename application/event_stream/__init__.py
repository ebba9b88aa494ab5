"""The live event stream: recorded events, in the sealed log's order, as public JSON."""
