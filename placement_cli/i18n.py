"""The language of tables, statuses, reasons, hints and the demo: Python's gettext, with the
catalogues shipped in ``placement_cli/locale`` (JSON output stays English)."""

from __future__ import annotations

import contextlib
import gettext
import os
import struct
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import overload

DOMAIN = "placement"
LOCALE_DIR = Path(__file__).parent / "locale"
LANGUAGES = ("en", "zh")
LOCALE_VARIABLES = ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG")  # the order gettext reads them in

_translation: gettext.NullTranslations = gettext.NullTranslations()
_language = "en"


def from_locale(environ: Mapping[str, str] | None = None) -> str:
    """The language the locale asks for, read as gettext reads it: the first of LANGUAGE, LC_ALL,
    LC_MESSAGES, LANG that is set (LANGUAGE may list several, ``zh_CN:en``). Chinese (``zh``,
    ``zh_CN.UTF-8``, ``zh_TW``) gives zh; anything else en."""
    environ = os.environ if environ is None else environ
    for name in LOCALE_VARIABLES:
        value = environ.get(name, "")
        if value:
            first = value.split(":")[0].strip().lower()
            return "zh" if first == "zh" or first.startswith(("zh_", "zh-", "zh.")) else "en"
    return "en"


def use(language: str | None = None) -> str:
    """Translate from now on into ``language`` (one of LANGUAGES; None: the locale's); English
    needs no catalogue. Returns the language chosen. The CLI chooses once per invocation (--lang's
    callback) and the app puts the language from before back when the invocation ends (``speaking``)."""
    chosen = language or from_locale()
    _set(chosen, gettext.NullTranslations() if chosen == "en" else
         gettext.translation(DOMAIN, LOCALE_DIR, languages=[chosen], fallback=True))
    return chosen


@contextlib.contextmanager
def speaking(language: str | None = None) -> Iterator[str]:
    """Translate into ``language`` (None: keep the current one) inside the block, and into the language
    from before it afterwards: one CLI invocation, one test, one rendering in another language."""
    before = _language, _translation
    try:
        yield use(language) if language is not None else _language
    finally:
        _set(*before)


def _set(language: str, translation: gettext.NullTranslations) -> None:
    global _translation, _language
    _language, _translation = language, translation


def characters(language: str) -> str:
    """Every character the ``language`` catalogue's translations use, beyond ASCII ("" for English):
    what a stream must encode to show that language (GBK and GB18030 do for zh; Big5 and ASCII do not)."""
    if language == "en":
        return ""
    found: set[str] = set()
    for path in (LOCALE_DIR / language / "LC_MESSAGES").glob(f"{DOMAIN}.mo"):
        found.update(c for text in _mo_translations(path.read_bytes()) for c in text if not c.isascii())
    return "".join(sorted(found))


def _mo_translations(data: bytes) -> list[str]:
    """The translated strings of a GNU .mo file (its documented layout: a header, then a table of
    (length, offset) pairs of the translations)."""
    order = "<" if data[:4] == b"\xde\x12\x04\x95" else ">"
    count, _originals, table = struct.unpack(order + "3I", data[8:20])
    found = []
    for i in range(count):
        length, offset = struct.unpack(order + "2I", data[table + 8 * i:table + 8 * i + 8])
        found.append(data[offset:offset + length].decode("utf-8"))
    return found


def language() -> str:
    return _language


def _(message: str) -> str:
    """``message`` in the chosen language (itself when no catalogue has it)."""
    return _translation.gettext(message)


def translated(message: str) -> str:
    """A message marked elsewhere with ``N_`` (a variable here, so not extracted twice) in the chosen language."""
    return _translation.gettext(message)


def N_(message: str) -> str:  # noqa: N802 - gettext's name for "mark for translation, translate later"
    """``message`` itself, marked for the catalogue: translated where it is shown, with ``_(name)``."""
    return message


class Message:
    """A message kept whole until it is shown: its template (marked with ``N_`` where it is written)
    and its fields, which may be Messages too. Not a string: ``str()`` (and an f-string) shows it in
    the chosen language, made from the template and the fields; ``english`` is its English text, what
    JSON, logs and comparisons use (a Message equals the string of its English text). Picklable: a
    child process may make it."""

    __slots__ = ("english", "fields", "template")

    template: str
    fields: dict[str, object]
    english: str

    def __init__(self, template: str | Message, /, **fields: object) -> None:
        if isinstance(template, Message):  # a Message made again: the same template, its fields kept
            fields = {**template.fields, **fields}
            template = template.template
        self.template = template
        self.fields = fields
        self.english = template.format(**{k: _field(v, _english_of) for k, v in fields.items()})

    def __reduce__(self) -> tuple[object, tuple[dict[str, object]]]:
        return Message.from_dict, (self.to_dict(),)  # pickled as it is sent as JSON: one wire format

    def __str__(self) -> str:
        return self.shown()

    def __format__(self, spec: str) -> str:  # f"{status:>15}": shown, then formatted as text is
        return format(self.shown(), spec)

    def __repr__(self) -> str:
        return f"Message({self.english!r})"

    def __eq__(self, other: object) -> bool:
        found = _compared(other)
        return NotImplemented if found is None else self.english == found

    def __hash__(self) -> int:
        return hash(self.english)

    def __lt__(self, other: object) -> bool:  # sorted() of reasons, roles and scopes: by their English text
        found = _compared(other)
        return NotImplemented if found is None else self.english < found

    def __gt__(self, other: object) -> bool:
        found = _compared(other)
        return NotImplemented if found is None else self.english > found

    def to_dict(self) -> dict[str, object]:
        """The message as one process sends it to another: its template and its fields, a field that
        is a Message as its own dict."""
        return {"template": self.template, "fields": {k: wire(v) for k, v in self.fields.items()}}

    @classmethod
    def from_dict(cls, data: object) -> Message:
        """A message ``to_dict`` wrote; ValueError for anything else."""
        if not (isinstance(data, dict) and isinstance(data.get("template"), str)
                and isinstance(data.get("fields", {}), dict)):
            raise ValueError(f"not a message: {str(data)[:80]}")
        fields = {k: tuple(map(_received, v)) if isinstance(v, list) else _received(v)
                  for k, v in data.get("fields", {}).items()}
        return cls(data["template"], **fields)

    def shown(self) -> str:
        return translated(self.template).format(**{k: _field(v, shown) for k, v in self.fields.items()})


def _compared(other: object) -> str | None:
    """What a Message is compared with: another's English, or a string; None for anything else."""
    return other.english if isinstance(other, Message) else other if isinstance(other, str) else None


def _english_of(value: object) -> object:
    return value.english if isinstance(value, Message) else value


def _field(value: object, text: Callable[[object], object]) -> object:
    """A field as a template takes it: a Message as ``text`` makes it, a tuple (of Messages or names)
    as its items so made, joined with ", ", anything else as it is."""
    if isinstance(value, tuple):
        return ", ".join(str(text(v)) for v in value)
    return text(value) if isinstance(value, Message) else value


def _received(value: object) -> object:
    return Message.from_dict(value) if isinstance(value, dict) else value


Wording = str | Message  # what a model's text field holds: a Message to translate where it is shown, or plain text


@overload
def english(text: Wording) -> str: ...
@overload
def english(text: Wording | None) -> str | None: ...
def english(text: Wording | None) -> str | None:
    """``text`` as JSON and logs write it: a Message's English text, a string as it is."""
    return text.english if isinstance(text, Message) else text


def wire(value: object) -> object:
    """``value`` (dicts, lists and tuples of anything) with each Message as its ``to_dict``: what
    json.dumps sends to another process (it would write a Message as its English text)."""
    if isinstance(value, Message):
        return value.to_dict()
    if isinstance(value, dict):
        return {k: wire(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [wire(v) for v in value]
    return value


def shown(text: object) -> str:
    """A Message in the chosen language; None as ""; anything else (a name) as it is."""
    if isinstance(text, Message):
        return text.shown()
    return "" if text is None else str(text)
