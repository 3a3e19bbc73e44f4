"""Optional JIT for the search kernels.

The kernels are plain Python loops over numpy arrays. With numba installed they are compiled to
machine code (cached on disk next to the sources); without it, or with `NUMBA_DISABLE_JIT=1`, the
same code runs as ordinary Python: same results, about two orders of magnitude slower.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any, TypeVar, cast

F = TypeVar("F", bound=Callable[..., Any])

HAVE_NUMBA = importlib.util.find_spec("numba") is not None


def jit(func: F) -> F:
    """Compile `func` in nopython mode when numba is available; return it unchanged otherwise."""
    if not HAVE_NUMBA:
        return func
    import numba

    return cast(F, numba.njit(cache=True, nogil=True)(func))
