"""YAML from files a contributor controls (suites, thresholds), with bounded cost.

yaml.safe_load shares an anchored node between its aliases, so a 500-byte "billion laughs"
file is cheap to load but explodes in whoever walks the result (2 GB, then MemoryError).
Here the composed node graph is measured first: expanded through its aliases it may hold at
most a few times the nodes the file spells out, and nest at most MAX_DEPTH deep. Integers
longer than Python converts (4,300 digits) and nesting deeper than Python recurses are
one-line errors too, never a traceback, and so is a lone surrogate escape ("\\ud800"), which
no file can hold as UTF-8 and which would stop the run when a prompt is hashed.
"""

from __future__ import annotations

from typing import Any

import yaml

from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.types import LONE_SURROGATE_ERROR, has_lone_surrogate
from orbench_pytest.core.untrusted import terminal_text

MAX_DEPTH = 64  # suites and thresholds nest 4 levels; more is an attack or a mistake
EXPANSION_SLACK = 10_000  # aliases may add this many nodes beyond twice the written ones


class _Loader(yaml.SafeLoader):
    def construct_bounded_int(self, node: yaml.ScalarNode) -> int:
        try:
            return super().construct_yaml_int(node)
        except ValueError:
            raise yaml.constructor.ConstructorError(
                None, None, f"an integer of {len(str(node.value))} characters is too long",
                node.start_mark) from None


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_bounded_int)


def load_yaml(text: str, name: str) -> Any:
    """The document in `text`; `name` (a file) starts every error message."""
    loader: _Loader | None = None
    try:
        loader = _Loader(text)  # the reader rejects control characters here already
        node = loader.get_single_node()
        if node is None:
            return None
        _check_shape(node, name)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}:" if mark is not None else ""
        problem = (getattr(exc, "problem", None) or _reader_problem(exc) or "invalid YAML")
        raise ConfigError(f"{name}:{where} not valid YAML ({problem})") from None
    except RecursionError:
        raise ConfigError(f"{name}: nested too deeply (at most {MAX_DEPTH} levels)") from None
    finally:
        if loader is not None:
            loader.dispose()


def _reader_problem(exc: yaml.YAMLError) -> str | None:
    if isinstance(exc, yaml.reader.ReaderError):
        return f"unacceptable character #x{exc.character:04x} at byte {exc.position}" \
            if isinstance(exc.character, int) else exc.reason
    return None


def _check_shape(root: yaml.Node, name: str) -> None:
    """Depth and alias-expanded size of the node graph, without expanding it: each distinct
    node is visited once (iteratively) and its expanded size memoised."""
    sizes: dict[int, int] = {}
    distinct = 0
    limit: int | None = None
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 1, False)]
    on_path: set[int] = set()
    while stack:
        node, depth, children_done = stack.pop()
        key = id(node)
        children = _children(node)
        if children_done:
            on_path.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in children)
            continue
        if depth > MAX_DEPTH:
            raise ConfigError(f"{name}: line {node.start_mark.line + 1}: nested too deeply "
                              f"(at most {MAX_DEPTH} levels)")
        if key in sizes:
            continue
        if key in on_path:
            raise ConfigError(f"{name}: line {node.start_mark.line + 1}: an alias refers to "
                              "its own anchor")
        on_path.add(key)
        distinct += 1
        if isinstance(node, yaml.ScalarNode) and has_lone_surrogate(node.value):
            raise ConfigError(f"{name}: line {node.start_mark.line + 1}: "
                              f"{LONE_SURROGATE_ERROR}")
        if isinstance(node, yaml.MappingNode):
            _check_unique_keys(node, name)
        stack.append((node, depth, True))
        stack.extend((child, depth + 1, False) for child in children
                     if id(child) not in sizes)
    limit = 2 * distinct + EXPANSION_SLACK
    if sizes[id(root)] > limit:
        raise ConfigError(f"{name}: aliases expand to {sizes[id(root)]:,} values from "
                          f"{distinct:,} written (at most {limit:,}); write the values out")


def _check_unique_keys(node: yaml.MappingNode, name: str) -> None:
    """A key written twice (two `defaults:`) would silently keep the last: an error."""
    seen: set[tuple[str, str]] = set()
    for key, _ in node.value:
        if not isinstance(key, yaml.ScalarNode) or key.value == "<<":
            continue
        if (key.tag, key.value) in seen:
            raise ConfigError(f"{name}: line {key.start_mark.line + 1}: the key "
                              f"{terminal_text(repr(key.value), 60)} is given twice in one "
                              "mapping (the first would be ignored); keep one")
        seen.add((key.tag, key.value))


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []
