"""Every public name of the SDK says what it is: the classes and functions rocketq,
rocketq.sync and rocketq.errors export, each public method and property of those classes,
and each field of their dataclasses (named in the class's docstring, where the API
reference reads it)."""

from __future__ import annotations

import dataclasses
import inspect
import sys
from types import ModuleType

import pytest

import rocketq
import rocketq.errors
import rocketq.sync
from tests.pure import compiled, rerun_pure

MODULES = [rocketq, rocketq.sync, rocketq.errors]


def exported() -> list[tuple[str, object]]:
    found: dict[str, object] = {}
    for module in MODULES:
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isclass(obj) or inspect.isfunction(obj):
                found[f"{module.__name__}.{name}"] = obj
    return sorted(found.items())


def undocumented(cls: type) -> list[str]:
    missing = []
    for name, member in vars(cls).items():
        if name.startswith("_"):
            continue
        if inspect.isfunction(member) or isinstance(member, property | classmethod | staticmethod):
            func = member.fget if isinstance(member, property) else member
            if not inspect.getdoc(func):
                missing.append(name)
    if dataclasses.is_dataclass(cls):
        doc = inspect.getdoc(cls) or ""
        missing += [f.name for f in dataclasses.fields(cls) if f.name not in doc]
    return missing


@pytest.mark.parametrize(("name", "obj"), exported(), ids=[n for n, _ in exported()])
def test_every_exported_name_is_documented(
    name: str, obj: object, request: pytest.FixtureRequest
) -> None:
    module = sys.modules[getattr(obj, "__module__", "builtins")]
    if inspect.isclass(obj) and compiled(getattr(module, "__file__", None)):
        rerun_pure(request)  # a compiled class keeps no docstring at run time (mypyc)
        return
    assert inspect.getdoc(obj), f"{name} has no docstring"
    if inspect.isclass(obj) and not issubclass(obj, BaseException):
        assert undocumented(obj) == [], f"{name}: undocumented members"


def test_the_modules_say_what_they_are() -> None:
    for module in MODULES:
        assert isinstance(module, ModuleType) and module.__doc__
