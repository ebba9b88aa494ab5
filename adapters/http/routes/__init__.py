"""The HTTP gateway's routes, one router per concern; ``app.py`` includes them."""
