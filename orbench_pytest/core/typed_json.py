"""Dataclasses to and from JSON: one definition a file is written by, checked by and read by.

`load(cls, raw, source)` builds `cls` from parsed JSON, checking every value against the field's
type (str, int, float (finite: no NaN or Infinity), bool, None, unions, list, tuple,
dict[str, X], nested dataclasses, and `Count`, a whole number >= 0). A wrong value is a one-line
ConfigError naming the file and the key (`r.json: gate.rows[0].n: expected a whole number >= 0,
got text`); unknown keys are ignored, absent ones take the field's default. `dump(obj)` is the
reverse: fields in order, a field made with `metadata=OMIT` left out while it holds its
default, plus what `json_extra()` adds. Each type's reader is built once (an 80K-item results
file is read per item, field by field).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, TypeVar, Union

from orbench_pytest.core.errors import ConfigError

T = TypeVar("T")
Count = Annotated[int, "a whole number >= 0"]
Reader = Callable[[Any], Any]
_PLAIN = (str, int, float, bool, type(None))
OMIT = {"omit": True}  # a field's metadata: its key is written only when not the default


def dump(obj: Any) -> Any:
    if type(obj) in _PLAIN or isinstance(obj, _PLAIN):
        return obj
    if isinstance(obj, (list, tuple)):
        return [dump(value) for value in obj]
    if isinstance(obj, dict):
        return {key: dump(value) for key, value in obj.items()}
    out = {}
    for name, omit, default in _fields(type(obj)):
        value = getattr(obj, name)
        if not (omit and value == default):
            out[name] = value if type(value) in _PLAIN else dump(value)
    extra = getattr(obj, "json_extra", None)
    return {**out, **extra()} if extra is not None else out


def load(cls: type[T], raw: Any, source: str, where: str = "") -> T:
    try:
        return typing.cast(T, _reader(typing.cast(Any, cls))(raw))
    except _Wrong as wrong:
        at = ".".join(filter(None, [where, *wrong.path])).replace(".[", "[")
        raise ConfigError(f"{source}: {at + ': ' if at else ''}{wrong.message}") from None


class _Wrong(Exception):
    """A value not of its type; `path` grows as it passes up through the containers.
    Private control flow, not an error of the package's: `load` turns it into a ConfigError
    naming the file and the path before it leaves this module."""

    path: list[str]

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message, self.path = message, []


_FIELDS: dict[type, list[tuple[str, bool, Any]]] = {}


def _fields(cls: type) -> list[tuple[str, bool, Any]]:
    found = _FIELDS.get(cls)
    if found is None:
        found = _FIELDS[cls] = [(f.name, bool(f.metadata.get("omit")), _default(f))
                                for f in dataclasses.fields(cls)]
    return found


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _expected(what: str, value: Any) -> _Wrong:
    kind = {dict: "an object", list: "a list", str: "text", bool: "true/false",
            type(None): "null"}.get(type(value), "a number")
    return _Wrong(f"expected {what}, got {kind}")


def _inside(key: str, read: Reader, value: Any) -> Any:
    try:
        return read(value)
    except _Wrong as wrong:
        wrong.path.insert(0, key)
        raise


@functools.cache
def _reader(kind: Any) -> Reader:
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if dataclasses.is_dataclass(kind):
        return _object_reader(typing.cast(type, kind))
    if origin is Annotated:  # Count

        def count(raw: Any) -> Any:
            if type(raw) is not int or raw < 0:
                raise _expected(args[1], raw)
            return raw
        return count
    if origin in (Union, types.UnionType):
        arms = [_reader(arm) for arm in args if arm is not type(None)]
        nullable = type(None) in args

        def union(raw: Any) -> Any:
            if raw is None and nullable:
                return None
            for read in arms[:-1]:
                try:
                    return read(raw)
                except _Wrong:
                    continue
            return arms[-1](raw)
        return union
    if origin is list:
        item = _reader(args[0])

        def list_of(raw: Any) -> Any:
            if type(raw) is not list:
                raise _expected("a list", raw)
            return [_inside(f"[{i}]", item, v) for i, v in enumerate(raw)]
        return list_of
    if origin is tuple:  # fixed length: an interval [low, high]
        parts = [_reader(arg) for arg in args]

        def tuple_of(raw: Any) -> Any:
            if type(raw) is not list or len(raw) != len(parts):
                raise _expected(f"a list of {len(parts)}", raw)
            return tuple(_inside(f"[{i}]", read, v)
                         for i, (read, v) in enumerate(zip(parts, raw, strict=True)))
        return tuple_of
    if origin is dict:
        value = _reader(args[1])

        def dict_of(raw: Any) -> Any:
            if type(raw) is not dict:
                raise _expected("an object", raw)
            return {key: _inside(key, value, v) for key, v in raw.items()}
        return dict_of
    if kind is float:

        def number(raw: Any) -> Any:
            if type(raw) is float:
                if not math.isfinite(raw):  # JSON as Python writes it: NaN, Infinity, 1e999
                    raise _Wrong(f"expected a finite number, got {json.dumps(raw)}")
                return raw
            if type(raw) is not int:
                raise _expected("a number", raw)
            return float(raw)
        return number
    names = {str: "text", int: "a whole number", bool: "true or false", type(None): "null"}

    def plain(raw: Any) -> Any:
        if type(raw) is not kind:
            raise _expected(names[kind], raw)
        return raw
    return plain


def _object_reader(cls: type) -> Reader:
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = [f for f in dataclasses.fields(cls) if f.init]
    required = [f.name for f in fields if _default(f) is dataclasses.MISSING]
    readers = [(f.name, _reader(hints[f.name])) for f in fields]

    def read(raw: Any) -> Any:
        if type(raw) is not dict:
            raise _expected("an object", raw)
        missing = [name for name in required if name not in raw]
        if missing:
            raise _Wrong(f"missing {', '.join(missing)}")
        return cls(**{name: _inside(name, read, raw[name])
                      for name, read in readers if name in raw})
    return read
