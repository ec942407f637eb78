"""The zoo pages' tables: a markdown table, and the verdicts a family's row gives (its outcome's kind) in the order
both family tables (paddlenlp's, PaddleFormers') list them, each with how the user's page reads it. page.py and
formers_page.py draw their tables with these. A module, not a command.
"""


# Each verdict a family's row gives (tools.zoo.families, tools.zoo.formers), in the order the tables list them (a test
# holds every verdict of the recorded runs to a line here)
READING = {
    "green, every plant red at its module": "the port is the same model: forward, each module isolated and 3 steps "
    "of backward green, and each bug planted in it red at the module it was planted in. A family with a cache is "
    "also judged with `use_cache` off and on, its ids as long as a head is wide: a key state has the attention "
    "weights' shape there.",
    "green, every plant red": "the same, but a plant is first red after the module it was planted in, at a later "
    "module or the model's output; the benchmark page's row says where.",
    "green, a plant green": "the correct port is green, but a planted bug was not caught: a gap of the checks.",
    "green, no part to plant in": "green; the family has no norm, attention query or embedding to plant a bug in.",
    "red on the correct port": "red, with no difference of the port named: a false red of the checks, or a "
    "difference not yet found.",
    "not the same model": "paddlenlp's port differs from transformers' original on correct use. The row names the "
    "difference, and the test that pins it (What the zoo finds in the ports, below).",
    "raises in its own library": "the port's own code raises on the current Paddle before anything is compared. The "
    "row names the line, and the test that pins it.",
    "refused": "`convert` refused to pair the two models with no map; the row gives its line.",
    "raises": "the run raised, for no reason the zoo knows; the row gives the error's line.",
    "not built": "one side cannot be built here: a package it needs is not installable, or its module is missing.",
    "not judged": "the family ran over its time (`--timeout`).",
}


def kind(outcome: str) -> str:
    return outcome.partition(":")[0]  # "not the same model: <why>" is one kind


def place(verdict: str) -> int:
    """Where a verdict's rows stand in a table: READING's order, a verdict it has no reading for last."""
    return list(READING).index(verdict) if verdict in READING else len(READING)


def unread(results: list) -> list:
    """The verdicts of a families' run the user's page has no reading for."""
    return sorted({kind(r["outcome"]) for r in results} - set(READING))



def cell(text) -> str:
    """Text in a markdown table's cell: one line, no column break, and no `[a] [b]` that Markdown would read as a
    reference link (`self_attn[0] [PC660]`: its second bracket escaped)."""
    return str(text).replace("|", "/").replace("\n", " ").replace("] [", "] \\[")



def table(header: list, rows: list) -> list:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + \
        ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
