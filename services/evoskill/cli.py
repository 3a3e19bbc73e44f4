"""The `evoskill` command line."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from evoskill.platform.config import describe

app = typer.Typer(help="evoskill: tool-using agents that improve their own skills.", no_args_is_help=True)
console = Console()


@app.command("config")
def config_cmd() -> None:
    """Print every setting with its default and meaning (env: EVOSKILL_<GROUP>__<NAME>)."""
    table = Table("setting", "default", "meaning")
    for name, default, meaning in describe():
        table.add_row(name, default, meaning)
    console.print(table)


if __name__ == "__main__":
    app()
