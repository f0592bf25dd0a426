"""The pipeline's own prompt templates (package data), or the user's files in their place.

Templates use `$name` placeholders (string.Template: `$$` is a literal dollar sign), so JSON or
braces in a user's template need no escaping. Each template's sha256 goes into the provenance.
"""

from __future__ import annotations

import hashlib
import string
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.untrusted import redacted_repr

# Template name → the placeholders it must use (and the only ones it may use).
PLACEHOLDERS: dict[str, frozenset[str]] = {
    "rewrite": frozenset({"seed", "count", "category"}),
    "moderate": frozenset({"prompt"}),
    "seed_topics": frozenset({"category", "description", "count"}),
}
# Which placeholders a template cannot do without: the text it works on.
REQUIRED: dict[str, frozenset[str]] = {
    "rewrite": frozenset({"seed"}),
    "moderate": frozenset({"prompt"}),
    "seed_topics": frozenset({"category"}),
}


@redacted_repr
@dataclass(frozen=True)
class PromptTemplate:
    name: str
    text: str
    source: str  # "builtin:rewrite.txt" or the user's path

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    def render(self, **values: object) -> str:
        return string.Template(self.text).substitute({k: str(v) for k, v in values.items()})


def builtin(name: str) -> PromptTemplate:
    text = (resources.files(__package__) / "prompts" / f"{name}.txt").read_text("utf-8")
    return PromptTemplate(name, text, f"builtin:{name}.txt")


def load_template(name: str, path: Path | None, option: str) -> PromptTemplate:
    """The built-in template `name`, or the file given with `option`, checked."""
    if path is None:
        return builtin(name)
    from orbench_pytest.core.bounded import OPTION_FILE_LIMIT, read_text

    try:
        text = read_text(path, OPTION_FILE_LIMIT)
    except ConfigError as exc:
        raise ConfigError(f"{option}: {exc}") from None
    template = PromptTemplate(name, text, str(path))
    check_template(template, option)
    return template


def placeholders(text: str) -> tuple[set[str], bool]:
    """The $names a template uses, and whether every '$' is a placeholder or '$$'.

    string.Template's own is_valid()/get_identifiers() need Python 3.11.
    """
    names: set[str] = set()
    valid = True
    for match in string.Template.pattern.finditer(text):
        name = match.group("named") or match.group("braced")
        if name:
            names.add(name)
        elif match.group("invalid") is not None:
            valid = False
    return names, valid


def check_template(template: PromptTemplate, option: str) -> None:
    allowed = PLACEHOLDERS[template.name]
    shown = ", ".join("$" + p for p in sorted(allowed))
    used, valid = placeholders(template.text)
    if not valid:
        raise ConfigError(f"{option}: {template.source}: a '$' that starts no placeholder "
                          f"(write $$ for a dollar sign; placeholders: {shown})")
    unknown = used - allowed
    if unknown:
        raise ConfigError(f"{option}: {template.source}: unknown placeholder "
                          f"${sorted(unknown)[0]} (allowed: {shown})")
    missing = REQUIRED[template.name] - used
    if missing:
        raise ConfigError(f"{option}: {template.source}: the template must contain "
                          f"${sorted(missing)[0]}, where the text to work on goes")
