"""The language of tables, statuses, reasons, hints and the demo: Python's gettext, with the
catalogues shipped in ``placement_cli/locale`` (JSON output stays English)."""

from __future__ import annotations

import contextlib
import gettext
import os
import struct
from collections.abc import Iterator, Mapping
from pathlib import Path

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


class Message(str):
    """A message kept whole until it is shown: its template (marked with ``N_`` where it is written)
    and its fields, which may be Messages too. As a string it is its English text (JSON, logs,
    comparisons, the notebook API); ``shown()`` is the same message in the chosen language, made
    from the template and the fields, never from the English text. Picklable: a child process may
    make it."""

    template: str
    fields: dict[str, object]

    def __new__(cls, template: str, /, **fields: object) -> Message:
        self = super().__new__(cls, template.format(**fields))
        self.template = template
        self.fields = fields
        return self

    def __reduce__(self) -> tuple[object, tuple[dict[str, object]]]:
        return Message.from_dict, (self.to_dict(),)  # pickled as it is sent as JSON: one wire format

    def to_dict(self) -> dict[str, object]:
        """The message as one process sends it to another: its template and its fields, a field that
        is a Message as its own dict (JSON keeps no str subclass)."""
        return {"template": self.template,
                "fields": {k: v.to_dict() if isinstance(v, Message) else v for k, v in self.fields.items()}}

    @classmethod
    def from_dict(cls, data: object) -> Message:
        """A message ``to_dict`` wrote; ValueError for anything else."""
        if not (isinstance(data, dict) and isinstance(data.get("template"), str)
                and isinstance(data.get("fields", {}), dict)):
            raise ValueError(f"not a message: {str(data)[:80]}")
        fields = {k: cls.from_dict(v) if isinstance(v, dict) else v for k, v in data.get("fields", {}).items()}
        return cls(data["template"], **fields)

    def shown(self) -> str:
        return translated(self.template).format(**{k: shown(v) if isinstance(v, Message) else v
                                                   for k, v in self.fields.items()})


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
