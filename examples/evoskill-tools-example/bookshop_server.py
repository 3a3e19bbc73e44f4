"""A small bookshop as an MCP server (the SDK's MCPServer, FastMCP's name in mcp 2.x).

    python bookshop_server.py                 # stdio: the way a tools: task file starts it
    python bookshop_server.py --http 8765     # streamable HTTP at http://127.0.0.1:8765/mcp
"""

from __future__ import annotations

import argparse
from typing import Literal

from mcp.server.mcpserver import MCPServer

Genre = Literal["science fiction", "mystery", "romance"]
BOOKS = [
    {"isbn": "978-0441478125", "title": "The Left Hand of Darkness", "author": "Ursula K. Le Guin",
     "genre": "science fiction", "price": 9.99},
    {"isbn": "978-0553293357", "title": "Foundation", "author": "Isaac Asimov", "genre": "science fiction",
     "price": 8.99},
    {"isbn": "978-0441172719", "title": "Dune", "author": "Frank Herbert", "genre": "science fiction", "price": 10.99},
    {"isbn": "978-0062693662", "title": "Murder on the Orient Express", "author": "Agatha Christie",
     "genre": "mystery", "price": 7.99},
    {"isbn": "978-0307474278", "title": "The Girl with the Dragon Tattoo", "author": "Stieg Larsson",
     "genre": "mystery", "price": 11.50},
    {"isbn": "978-0141439518", "title": "Pride and Prejudice", "author": "Jane Austen", "genre": "romance",
     "price": 6.99},
]
server = MCPServer("bookshop")


def _listing(book: dict[str, object]) -> dict[str, object]:
    return {"isbn": book["isbn"], "title": book["title"], "author": book["author"]}


@server.tool()
def search_books(genre: Genre) -> list[dict[str, object]]:
    """The books of a genre in the shop (without prices)."""
    return [_listing(b) for b in BOOKS if b["genre"] == genre]


@server.tool()
def find_by_author(author: str) -> list[dict[str, object]]:
    """The books in the shop by an author."""
    return [_listing(b) for b in BOOKS if str(b["author"]).casefold() == author.strip().casefold()]


@server.tool()
def get_price(isbn: str) -> dict[str, object]:
    """The price of a book, in euros."""
    for book in BOOKS:
        if book["isbn"] == isbn:
            return {"isbn": isbn, "price": book["price"], "currency": "EUR"}
    raise ValueError(f"no book with ISBN {isbn!r}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT")
    port = parser.parse_args().http
    if port:
        server.run("streamable-http", port=port)
    else:
        server.run()
