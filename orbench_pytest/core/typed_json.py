"""Dataclasses to and from JSON: one definition a file is written by, checked by and read by.

`load(cls, raw, source)` builds `cls` from parsed JSON, checking every value against the field's
type (str, int, float, bool, None, unions, list, tuple, dict[str, X], nested dataclasses, and
`Count`, a whole number >= 0). A wrong value is a one-line ConfigError naming the file and the
key (`r.json: gate.rows[0].n: expected a whole number >= 0, got text`); unknown keys are ignored,
absent ones take the field's default. `dump(obj)` is the reverse: fields in order, a field made
with `spec(omit=True)` left out while it holds its default, plus what `json_extra()` adds.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, TypeVar, Union

from orbench_pytest.core.errors import ConfigError

T = TypeVar("T")
Count = Annotated[int, "a whole number >= 0"]


def spec(doc: str = "", *, default: Any = dataclasses.MISSING,
         factory: Callable[[], Any] | Any = dataclasses.MISSING, omit: bool = False) -> Any:
    """A field with its documentation; `omit`: the key is written only when not the default."""
    return dataclasses.field(default=default, default_factory=factory,
                             metadata={"doc": doc, "omit": omit})


def dump(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {}
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if f.metadata.get("omit") and value == _default(f):
                continue
            out[f.name] = dump(value)
        extra = getattr(obj, "json_extra", None)
        return {**out, **extra()} if extra is not None else out
    if isinstance(obj, (list, tuple)):
        return [dump(value) for value in obj]
    if isinstance(obj, dict):
        return {key: dump(value) for key, value in obj.items()}
    return obj


def load(cls: type[T], raw: Any, source: str, where: str = "") -> T:
    return typing.cast(T, _value(cls, raw, source, where))


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


_HINTS: dict[type, dict[str, Any]] = {}


def _object(cls: type, raw: Any, source: str, where: str) -> Any:
    if not isinstance(raw, dict):
        raise _fail(source, where, "an object", raw)
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls, include_extras=True)
    fields = [f for f in dataclasses.fields(cls) if f.init]
    missing = [f.name for f in fields if f.name not in raw and _default(f) is dataclasses.MISSING]
    if missing:
        raise ConfigError(f"{source}: {where + ': ' if where else ''}missing {', '.join(missing)}")
    return cls(**{f.name: _value(hints[f.name], raw[f.name], source, _at(where, f.name))
                  for f in fields if f.name in raw})


def _at(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _value(kind: Any, raw: Any, source: str, where: str) -> Any:
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if dataclasses.is_dataclass(kind):
        return _object(typing.cast(type, kind), raw, source, where)
    if origin is Annotated:  # Count
        if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
            raise _fail(source, where, args[1], raw)
        return raw
    if origin in (Union, types.UnionType):
        if raw is None and type(None) in args:
            return None
        arms = [arm for arm in args if arm is not type(None)]
        for arm in arms[:-1]:
            try:
                return _value(arm, raw, source, where)
            except ConfigError:
                continue
        return _value(arms[-1], raw, source, where)
    if origin is list:
        if not isinstance(raw, list):
            raise _fail(source, where, "a list", raw)
        return [_value(args[0], v, source, f"{where}[{i}]") for i, v in enumerate(raw)]
    if origin is tuple:  # fixed length: an interval [low, high]
        if not isinstance(raw, list) or len(raw) != len(args):
            raise _fail(source, where, f"a list of {len(args)}", raw)
        return tuple(_value(a, v, source, f"{where}[{i}]")
                     for i, (a, v) in enumerate(zip(args, raw, strict=True)))
    if origin is dict:
        if not isinstance(raw, dict):
            raise _fail(source, where, "an object", raw)
        return {key: _value(args[1], v, source, _at(where, key)) for key, v in raw.items()}
    if kind is Any:
        return raw
    if kind is float:
        if isinstance(raw, bool) or not isinstance(raw, (int, float)):
            raise _fail(source, where, "a number", raw)
        return float(raw)
    if kind is int:
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise _fail(source, where, "a whole number", raw)
        return raw
    if kind is bool and not isinstance(raw, bool):
        raise _fail(source, where, "true or false", raw)
    if kind is str and not isinstance(raw, str):
        raise _fail(source, where, "text", raw)
    if kind is type(None) and raw is not None:
        raise _fail(source, where, "null", raw)
    return raw


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "true/false",
            type(None): "null"}.get(type(value), "a number")


def _fail(source: str, where: str, expected: str, value: Any) -> ConfigError:
    return ConfigError(f"{source}: {where or 'the document'}: expected {expected}, "
                       f"got {_kind(value)}")
