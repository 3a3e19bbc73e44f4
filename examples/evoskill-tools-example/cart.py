"""Python tools over the episode's state: a parameter named `state` receives it (not part of the schema)."""

from __future__ import annotations


def add_to_cart(state: dict, isbn: str) -> str:
    """Put a book in the cart."""
    state.setdefault("cart", []).append(isbn)
    return f"{isbn} is in the cart ({len(state['cart'])} book(s))"


def remove_from_cart(state: dict, isbn: str) -> str:
    """Take a book out of the cart."""
    if isbn not in state.get("cart", []):
        raise ValueError(f"{isbn} is not in the cart")
    state["cart"].remove(isbn)
    return f"{isbn} left the cart"

