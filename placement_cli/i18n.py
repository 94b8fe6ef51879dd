"""The language of tables, statuses, reasons, hints and the demo: Python's gettext, with the
catalogues shipped in ``placement_cli/locale`` (JSON output stays English)."""

from __future__ import annotations

import gettext
from pathlib import Path

DOMAIN = "placement"
LOCALE_DIR = Path(__file__).parent / "locale"
LANGUAGES = ("en", "zh")

_translation: gettext.NullTranslations = gettext.NullTranslations()


def use(language: str) -> None:
    """Translate from now on into ``language`` (one of LANGUAGES); English needs no catalogue."""
    global _translation  # noqa: PLW0603 - one language per process, chosen once by the CLI
    _translation = gettext.translation(DOMAIN, LOCALE_DIR, languages=[language], fallback=True)


def _(message: str) -> str:
    """``message`` in the chosen language (itself when no catalogue has it)."""
    return _translation.gettext(message)


def ngettext(singular: str, plural: str, n: int) -> str:
    return _translation.ngettext(singular, plural, n)
