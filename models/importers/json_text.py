"""The JSON a user's model file holds (a spec file, `to_json()`'s output, a `.keras` file's config.json), read within
Python's bounds: each way it can fail is one SpecError naming the file, never a traceback.

Python's parser stops at a number of more than 4,300 digits and at nesting past its recursion limit, and the
importers walk what it gives recursively (a Keras layer's inbound tensors, a model used as a layer): a document
nested deeper than MAX_NESTING is refused before any importer walks it.
"""

from __future__ import annotations

import json

from models.spec import MAX_SIZE, SpecError

# Far past any model file (a functional Keras model's config is 11 levels deep, a model used as a layer adds a few)
# and far below Python's recursion limit (1,000 frames), which the importers' walks must stay under.
MAX_NESTING = 100


def parsed_json(text: str | bytes, source: str) -> object:
    """The document `text` holds; `source` names it (the file, or the file's member) in the error."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError(f"{source} is not valid JSON: {exc.msg} at line {exc.lineno}") from exc
    except UnicodeDecodeError as exc:
        raise SpecError(f"{source} is not UTF-8 text") from exc
    except ValueError as exc:  # json reads a number of more digits than Python converts to an int
        raise SpecError(f"{source} holds a number of more digits than can be read (sizes are at most "
                        f"{MAX_SIZE:,})") from exc
    except RecursionError as exc:
        raise SpecError(f"{source} nests its JSON deeper than Python's parser goes (a model file nests at most "
                        f"{MAX_NESTING} levels)") from exc
    if _nested_past(data, MAX_NESTING):
        raise SpecError(f"{source} nests its JSON more than {MAX_NESTING} levels deep; no model file does")
    return data


def _nested_past(data: object, levels: int) -> bool:
    """Whether lists and objects nest more than `levels` deep in `data` (walked with a stack of its own)."""
    pending = [(data, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, (dict, list)):
            if depth > levels:
                return True
            pending.extend((child, depth + 1) for child in (value.values() if isinstance(value, dict) else value))
    return False
