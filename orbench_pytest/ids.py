"""The one home of an item's id: how a (suite, variant, case) names its test item, and back."""

from __future__ import annotations

ItemKey = tuple[str, str, str]  # suite, variant ("" for the default), case id


def item_name(suite: str, case_id: str, variant: str = "") -> str:
    """The item's name as pytest shows it: suite[variant:case] or suite[case]."""
    return f"{suite}[{variant}:{case_id}]" if variant else f"{suite}[{case_id}]"


def group_name(suite: str, variant: str = "") -> str:
    """A suite, or one variant of it, as tables and messages name it: suite or suite[variant]."""
    return f"{suite}[{variant}]" if variant else suite


def key_label(key: ItemKey) -> str:
    suite, variant, case_id = key
    return item_name(suite, case_id, variant)


def parse_item_name(name: str, suite: str, variant: str = "") -> str:
    """The case id inside an item name made by item_name; the name itself if it is not one."""
    inner = name[len(suite) + 1:-1] if name.startswith(suite + "[") and name.endswith("]") else name
    if variant and inner.startswith(variant + ":"):
        return inner[len(variant) + 1:]
    return inner
