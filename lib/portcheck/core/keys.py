"""Record keys: out/<module>#<n>[0]:x (a module call's output, in/ its first input) and the model's own name among
its modules. Pure functions of keys and a record's order of them; imports the standard library only."""
import re

ROOT = "(model)"   # the model itself among its modules (compare.py's record keys use it too)
_KEY = re.compile(r"^(out|in)/([^#\[:]*)(#\d+)?(.*)$")  # kind, module, #call, then [index] or :key


def split_key(key: str) -> tuple:
    """A record key out/<module>#<n>[0]:x as (kind, call, rest): ("out", "<module>#<n>", "[0]:x")."""
    kind, module, call, rest = _KEY.match(key).groups()
    return kind, module + (call or ""), rest


NOTATION = "#[]:"  # what the key notation reads out of a key: a module's name holding one is read as another
LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # where str.splitlines() parts a name


def unkeyed(name: str) -> str:
    """The character of a module's name that cannot stand in a record key as itself (NOTATION's, a line break),
    "" where none does."""
    return next((c for c in name if c in NOTATION or c in LINE_BREAKS), "")


def positions(record) -> tuple:
    """(a record's keys in run order, {key: its place}): a run walked from any key without searching the list."""
    keys = list(record)
    return keys, {k: i for i, k in enumerate(keys)}


def input_after(keys: list, at: int):
    """The first input key (in/...) after place `at` of a record's keys in run order: what the run fed the next
    module it entered (None: it entered none)."""
    return next((k for k in keys[at + 1:] if k.startswith("in/")), None)


def module_of(call: str) -> str:
    return call.split("#")[0]
