"""The rules for names and free text users give (a leaf module: imports nothing of ours
but the errors).

- **One normalisation rule**: names (workloads, sizes, precisions, devices, frameworks,
  suites' case choices and the result filters) are accepted in any letter case and
  stored in their canonical lower-case form (:func:`fold`): ``--size TINY`` is ``tiny``.
- **Identifiers**: a workload or size name, built in or from a plugin, matches
  :data:`IDENTIFIER_PATTERN` (lower case, starts with a letter, at most 64 characters).
- **Tags**: free text of at most :data:`MAX_TAG_LEN` characters, without control
  characters (newlines, tabs, escape sequences).
"""

from __future__ import annotations

import re
import unicodedata

from accelbench.errors import ConfigError

#: What a workload or size name must match (documented in docs/usage.md).
IDENTIFIER_PATTERN = r"^[a-z][a-z0-9_.-]{0,63}$"
_IDENTIFIER = re.compile(IDENTIFIER_PATTERN)
#: Most characters of a tag (``--tag``).
MAX_TAG_LEN = 200


def fold(name: str) -> str:
    """The canonical form of a name a user typed: surrounding blanks dropped, lower case."""
    return name.strip().lower() if isinstance(name, str) else name


def check_identifier(what: str, name: object, origin: str = "") -> str:
    """``name`` if it is a valid identifier, else :class:`ConfigError` naming ``what`` and
    where it came from (``origin``: the plugin or module that declared it)."""
    if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
        where = f" (declared by {origin})" if origin else ""
        raise ConfigError(f"{what} name {name!r}{where} is not a valid identifier: it must "
                          f"match {IDENTIFIER_PATTERN} (lower case letters, digits, '_', "
                          "'.', '-'; a letter first; at most 64 characters)")
    return name


#: The Unicode categories no text a user gives may hold: controls (newlines, tabs, the
#: escape of terminal sequences), format characters (zero-width spaces, bidirectional
#: overrides), line and paragraph separators, and surrogates (bytes that were not UTF-8).
CONTROL_CATEGORIES = ("Cc", "Cf", "Zl", "Zp", "Cs")


def control_char(text: str) -> str | None:
    """The first character of ``text`` in :data:`CONTROL_CATEGORIES`, or None."""
    return next((c for c in text if unicodedata.category(c) in CONTROL_CATEGORIES), None)


def text_problem(text: str) -> str | None:
    """What is wrong with free text a user gave (an id, a title, a path), or None: a
    control character, or a byte that was not UTF-8 (a surrogate, as Python decodes it)."""
    bad = control_char(text)
    if bad is None:
        return None
    if unicodedata.category(bad) == "Cs":
        return f"must be valid UTF-8, got {ascii(text)[:80]}"
    name = unicodedata.name(bad, "")
    return (f"must not contain control characters, got U+{ord(bad):04X}"
            f"{' ' + name if name else ''} in {ascii(text)[:80]}")


def number_problem(text: str) -> str | None:
    """What is wrong with the text of a number, or None: Python reads digits of any
    script (``int("٣")`` is 3, ``float("３")`` is 3.0), a command line takes ASCII only."""
    if text.isascii():
        return None
    return f"must be written in ASCII digits, got {ascii(text)}"


def tag_problem(tag: object) -> str | None:
    """What is wrong with a tag, or None."""
    if not isinstance(tag, str):
        return f"must be text, got {tag!r}"
    if len(tag) > MAX_TAG_LEN:
        return f"must be at most {MAX_TAG_LEN} characters, got {len(tag)}"
    return text_problem(tag)


def check_tag(tag: str) -> str:
    """``tag`` if it is a valid tag, else :class:`ConfigError`."""
    problem = tag_problem(tag)
    if problem:
        raise ConfigError(f"--tag {problem}")
    return tag
