"""What commands print: rich tables for people, one stable JSON document for scripts (`--format json`).

A command builds its answer once as plain data (dicts, lists, str, int, None: the JSON document, whose keys are a
stable interface) and says how people see it: `Table`s of rows and/or `Fields` (name: value pairs). `emit` prints
one or the other. Tables use colour and box lines only on a terminal; piped, they are plain aligned columns that
are never wrapped or cut (grep and awk read them). Text is never read as rich markup (a group named `[bold]`
prints as itself), and its control characters are shown escaped (`errors.visible`): a name holding a newline or an
escape sequence stays on its line and cannot drive the terminal. JSON carries names exactly as they are.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import click

from .errors import visible
from .options import output_format

# Piped output is never wrapped: wide enough for any row.
_UNBOUNDED_WIDTH = 100_000


@dataclass
class Table:
    """Rows under column headers; `columns` are (key in each row dict, header) pairs."""
    columns: Sequence[tuple[str, str]]
    rows: Iterable[dict]
    title: str | None = None


@dataclass
class Fields:
    """Name: value lines (a record's details)."""
    values: dict[str, Any]
    title: str | None = None


@dataclass
class Message:
    """A line of text for people (json output leaves it out)."""
    text: str


def emit(ctx: click.Context, document: Any, *views) -> None:
    """Print `document` as JSON (`--format json`), else each view (Table, Fields, Message, str) in turn."""
    if output_format(ctx) == "json":
        print_json(document)
        return
    console = make_console()
    for index, view in enumerate(views):
        if index and isinstance(view, (Table, Fields)):
            console.print()
        _print_view(console, view)


def _print_view(console, view) -> None:
    if isinstance(view, Table):
        shown = render_table(view, console.is_terminal)
    elif isinstance(view, Fields):
        shown = render_fields(view, console.is_terminal)
    else:
        shown = visible(view.text if isinstance(view, Message) else str(view))
    if console.is_terminal:
        console.print(shown)
        return
    with console.capture() as captured:  # piped: plain lines without the padding after the last column
        console.print(shown)
    console.file.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))
    console.file.flush()


def print_json(document: Any) -> None:
    """One JSON document on stdout, keys in the order the command built them, bytes never."""
    sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False, default=_json_default) + "\n")
    sys.stdout.flush()


def _json_default(value):
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    to_json = getattr(value, "to_json", None)
    if to_json is not None:
        return to_json()
    raise TypeError(f"cannot show {type(value).__name__} as JSON")


def make_console(stderr: bool = False):
    """A rich Console that styles only on a terminal (where $NO_COLOR still turns colour off) and never wraps piped
    output."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    terminal = stream.isatty()
    return Console(file=stream, highlight=False, markup=False, emoji=False, soft_wrap=not terminal,
                   width=None if terminal else _UNBOUNDED_WIDTH, no_color=None if terminal else True,
                   force_terminal=terminal)


def render_table(table: Table, terminal: bool):
    from rich import box
    from rich.table import Table as RichTable
    from rich.text import Text

    title = visible(table.title) if table.title else None
    shown = RichTable(title=title if terminal else None, box=box.SIMPLE_HEAD if terminal else None,
                      show_edge=False, pad_edge=False, header_style="bold" if terminal else "",
                      title_justify="left")
    for _, header in table.columns:
        shown.add_column(header, overflow="fold" if terminal else "ignore", no_wrap=not terminal)
    for row in table.rows:
        shown.add_row(*(Text(cell_text(row.get(key))) for key, _ in table.columns))
    if title and not terminal:
        from rich.console import Group
        return Group(Text(title), shown)
    return shown


def render_fields(fields: Fields, terminal: bool):
    from rich.table import Table as RichTable
    from rich.text import Text

    shown = RichTable.grid(padding=(0, 2))
    shown.add_column(style="bold" if terminal else "")
    shown.add_column()
    for name, value in fields.values.items():
        shown.add_row(Text(visible(name)), Text(cell_text(value)))
    if fields.title:
        from rich.console import Group
        return Group(Text(visible(fields.title), style="bold" if terminal else ""), shown)
    return shown


def cell_text(value: Any) -> str:
    """How a value reads in a table cell: lists comma-separated, None as '-', booleans as yes/no, control
    characters escaped."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple, set, frozenset)):
        return ",".join(cell_text(item) for item in value) if value else "-"
    if isinstance(value, dict):
        return ",".join(f"{visible(str(key))}={cell_text(item)}" for key, item in value.items())
    return visible(str(value))
