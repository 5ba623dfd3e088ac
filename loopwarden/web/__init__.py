"""The console in a browser (`loopwarden web`): the same Textual console, served by textual-serve behind a token.

token.py keeps the token (no heavy imports: the CLI reads it); server.py serves the console (aiohttp and
textual-serve, imported only when `loopwarden web` runs).
"""
