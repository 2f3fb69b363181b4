"""Option values converted without pydantic: typer 0.29 converts every value through a
pydantic `TypeAdapter`, which costs more than the rest of `evidence verify` to import and
build (about 0.1 s).

`FastValue` converts the values this tool's options take (paths, lists of paths, strings,
enums, integers and decimals written plainly) itself, the way typer would, and hands any
other value, every value it would refuse, and every kind of option it does not know to
typer's own converter (`typer._coercion.build_runtime_param`, the reference). So a value
typer refuses is refused with typer's own message, and a value this module accepts is
the one typer gives: tests/test_cli_coerce.py checks both on every option of every
command, with hypothesis-made inputs.
"""

from __future__ import annotations

import enum
import pathlib
import re
from typing import Any, get_args, get_origin

import typer.core
from typer._coercion import RuntimeParam, build_runtime_param
from typer._param_types import coerce_cli_choice, coerce_cli_path, lenient_issubclass

_INTEGER = re.compile(r"[0-9]{1,18}", re.ASCII)  # what int() and pydantic read alike
_DECIMAL = re.compile(r"[0-9]{1,15}(\.[0-9]{1,15})?", re.ASCII)


class _Refer(Exception):
    """The value is not one the fast path decides: typer's converter does."""


class FastValue:
    """A parameter's converter (typer's `RuntimeParam` contract: `coerce`)."""

    def __init__(self, param: typer.core._TyperParameter) -> None:
        self.param = param
        self._reference: RuntimeParam | None = None

    def reference(self) -> RuntimeParam:
        """typer's own converter for this parameter (imports pydantic, once)."""
        if self._reference is None:
            self._reference = build_runtime_param(self.param.type_descriptor)
        return self._reference

    def coerce(self, value: Any, param: typer.core._TyperParameter, ctx: Any) -> Any:
        try:
            return self._fast(value, param, ctx)
        except Exception:  # _Refer, or a refusal: typer's converter decides and words it
            return self.reference().coerce(value, param=param, ctx=ctx)

    def _fast(self, value: Any, param: typer.core._TyperParameter, ctx: Any) -> Any:
        descriptor = param.type_descriptor
        info = descriptor.parameter_info
        if descriptor.file_annotation is not None or info.parser is not None:
            raise _Refer
        is_multi = param.multiple or param.nargs == -1
        if value is None:
            return () if is_multi else None
        if is_multi and isinstance(value, str):
            raise _Refer
        annotation: Any = descriptor.annotation
        if get_origin(annotation) is list:
            (item_type,) = get_args(annotation)
            if not isinstance(value, (list, tuple)):
                value = [value]
            return [_leaf(item, item_type, info, ctx) for item in value]
        return _leaf(value, annotation, info, ctx)


def _leaf(value: Any, annotation: Any, info: Any, ctx: Any) -> Any:
    if lenient_issubclass(annotation, enum.Enum):
        choices = list(annotation)
        sensitive = info.case_sensitive
        return coerce_cli_choice(value, choices=choices, case_sensitive=sensitive, ctx=ctx)
    if annotation is int and not info.clamp:
        if isinstance(value, str) and _INTEGER.fullmatch(value):
            number: int | float = int(value)
        elif type(value) is int:
            number = value
        else:
            raise _Refer
        return _in_range(number, info)
    if annotation is float and not info.clamp:
        plain = isinstance(value, str) and _DECIMAL.fullmatch(value)
        if plain or type(value) in (int, float):
            number = float(value)
        else:
            raise _Refer
        return _in_range(number, info)
    if annotation is str and isinstance(value, str):
        return value
    if annotation is pathlib.Path and info.path_type is None:
        if not isinstance(value, (str, pathlib.Path)):
            raise _Refer
        if isinstance(value, str) and (not value or "\0" in value):
            raise _Refer
        path = value if isinstance(value, pathlib.Path) else pathlib.Path(value)
        return coerce_cli_path(path, info, path_type=pathlib.Path)
    raise _Refer


def _in_range(number: int | float, info: Any) -> int | float:
    if info.min is not None and number < info.min:
        raise _Refer
    if info.max is not None and number > info.max:
        raise _Refer
    return number


def install(params: list[Any]) -> None:
    """Give each typer parameter of a command the fast converter (once)."""
    for param in params:
        if isinstance(param, typer.core._TyperParameter) and param._runtime_param is None:
            param._runtime_param = FastValue(param)  # type: ignore[assignment]
