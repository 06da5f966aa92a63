"""Generate ``sdk/blocking.py``, the blocking twins of the SDK's asynchronous clients that
``rocketq.sync`` exports, from the asynchronous classes themselves.

Each twin has every public method of its asynchronous class, written out with the same
parameters (names, kinds, defaults and annotations, copied from the source) and typed:

* a coroutine method waits for the coroutine on the SDK's background loop and returns what
  it returns;
* a method that starts a task and returns it (``send_async``) returns a
  :class:`concurrent.futures.Future` of the task's result;
* a method returning an async iterator, an async generator method and ``__aiter__``
  become plain iterators (``for msg in consumer``);
* ``__aenter__``/``__aexit__`` become ``__enter__``/``__exit__``, with ``close()`` the
  twin of ``shutdown()`` when the class has no ``close`` of its own;
* other methods run on the loop and return what they return; properties read through.

    python tools/gen_blocking.py            # write sdk/blocking.py
    python tools/gen_blocking.py --check    # exit 1 if sdk/blocking.py is not what it writes

A signature change in the asynchronous SDK without a new run fails
``tests/sdk/test_blocking_generated.py``.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import importlib
import importlib.util
import inspect
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parents[1]
OUT: Final = ROOT / "sdk" / "blocking.py"
COMMAND: Final = "python tools/gen_blocking.py"
LINE_LENGTH: Final = 100  # ruff's line-length (pyproject.toml)

# The asynchronous classes, in the order their twins are written (a base before its
# subclasses): (module, class name).
CLASSES: Final = (
    ("rocketq.sdk.admin", "Admin"),
    ("rocketq.sdk.producer", "Producer"),
    ("rocketq.sdk.transaction", "TransactionProducer"),
    ("rocketq.sdk.push_consumer", "PushConsumer"),
    ("rocketq.sdk.pull_consumer", "PullConsumer"),
)
HELPERS: Final = "rocketq.sdk.background_loop"
ASYNC_ITERATORS: Final = frozenset({"AsyncIterator", "AsyncGenerator", "AsyncIterable"})
STARTED: Final = frozenset({"Task", "Future", "Awaitable"})
# Names the generated module binds itself (besides the twins and the modules' aliases):
# the helpers, which no asynchronous module may use for anything else, and typing names,
# which must mean the same there.
HELPER_NAMES: Final = ("call_blocking", "future_blocking", "iterate_blocking", "run_blocking")
OWN_NAMES: Final = {
    "ClassVar": ("typing", "ClassVar"),
    "Self": ("typing", "Self"),
    "TYPE_CHECKING": ("typing", "TYPE_CHECKING"),
    "Iterator": ("collections.abc", "Iterator"),
    **{name: (HELPERS, name) for name in HELPER_NAMES},
}


class GenerateError(Exception):
    """The asynchronous classes have something the generator cannot write a twin of."""


# -- where names come from ------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Binding:
    """How a module binds a name: ``from module import attr as name`` (attr set) or
    ``import module as name`` (attr None)."""

    module: str
    """The module imported, or the one imported from."""
    attr: str | None
    """The name taken from ``module``; None when the module itself is bound."""
    name: str
    """The name bound."""

    def statement(self) -> str:
        """The import statement that binds the name."""
        if self.attr is None:
            if self.module.split(".")[0] == self.name:
                return f"import {self.module}"
            return f"import {self.module} as {self.name}"
        if self.attr == self.name:
            return f"from {self.module} import {self.attr}"
        return f"from {self.module} import {self.attr} as {self.name}"

    def value(self) -> object:
        """What the name is bound to (imported now)."""
        module = importlib.import_module(self.module)
        return module if self.attr is None else getattr(module, self.attr, None)


@cache
def _module_tree(module_name: str) -> ast.Module:
    module = importlib.import_module(module_name)
    return ast.parse(inspect.getsource(module))


def _statements(body: list[ast.stmt]) -> Iterable[ast.stmt]:
    """Top-level statements, those inside ``if TYPE_CHECKING:`` and ``try:`` too."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from _statements(node.body)
            yield from _statements(node.orelse)
        elif isinstance(node, ast.Try):
            yield from _statements(node.body)


def binding_of(module_name: str, name: str) -> Binding | None:
    """How ``module_name`` comes to have ``name`` (None: a builtin)."""
    for node in _statements(_module_tree(module_name).body):
        if isinstance(node, ast.ImportFrom):
            source = importlib.util.resolve_name(
                "." * node.level + (node.module or ""), _package_of(module_name)
            )
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    return Binding(source, alias.name, name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname == name:
                    return Binding(alias.name, None, name)
                if alias.asname is None and alias.name.split(".")[0] == name:
                    return Binding(name, None, name)
        elif isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            if node.name == name:
                return Binding(module_name, name, name)
        elif isinstance(node, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                return Binding(module_name, name, name)
        elif (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == name
        ):
            return Binding(module_name, name, name)
    if hasattr(builtins, name):
        return None
    raise GenerateError(f"{module_name} uses {name!r} but neither defines nor imports it")


def _package_of(module_name: str) -> str:
    module = sys.modules[module_name]
    return module.__package__ or module_name.rpartition(".")[0]


def names_in(source: str) -> set[str]:
    """The names an annotation or a default expression reads (a dotted name's first part)."""
    tree = ast.parse(source, mode="eval")
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}


@dataclass
class Imports:
    """The names the generated module needs, each bound as its asynchronous module binds it;
    ``runtime`` ones are read when the module runs (defaults), the others by type checkers
    only (annotations)."""

    runtime: dict[str, Binding] = field(default_factory=dict)
    """Names read when the module runs (in defaults), imported at its top."""
    typing: dict[str, Binding] = field(default_factory=dict)
    """Names read by type checkers only, imported under ``if TYPE_CHECKING:``."""
    reserved: set[str] = field(default_factory=set)
    """Names the generated module binds itself, which no asynchronous module may use."""

    def need(self, source: str, module_name: str, *, runtime: bool) -> None:
        """Bind every name ``source`` (an annotation or a default read in ``module_name``)
        reads, as ``module_name`` binds it; GenerateError on a clash."""
        for name in sorted(names_in(source)):
            binding = binding_of(module_name, name)
            if binding is None:
                continue
            if name in self.reserved:
                raise GenerateError(
                    f"{module_name} uses the name {name!r}, which the blocking module binds to "
                    "a class or a helper of its own; import it under another name there"
                )
            known = self.runtime.get(name) or self.typing.get(name)
            if known is not None and known != binding and known.value() is not binding.value():
                raise GenerateError(
                    f"{name!r} means {known.statement()!r} in one asynchronous module and "
                    f"{binding.statement()!r} in another; import one under another name"
                )
            binding = known or binding
            if runtime:
                self.typing.pop(name, None)
                self.runtime[name] = binding
            elif name not in self.runtime:
                self.typing[name] = binding


# -- the members of a class -------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """One parameter as the asynchronous method declares it."""

    name: str
    """The parameter's name."""
    kind: inspect._ParameterKind
    """Positional-only, positional-or-keyword, ``*args``, keyword-only or ``**kwargs``."""
    annotation: str | None
    """The annotation's text, as ``from __future__ import annotations`` keeps it."""
    default: str | None
    """The default's source text, or None."""

    def declare(self) -> str:
        """The parameter as a ``def`` declares it."""
        text = self.name
        if self.kind is inspect.Parameter.VAR_POSITIONAL:
            text = "*" + text
        elif self.kind is inspect.Parameter.VAR_KEYWORD:
            text = "**" + text
        if self.annotation is not None:
            text += f": {self.annotation}"
            if self.default is not None:
                text += f" = {self.default}"
        elif self.default is not None:
            text += f"={self.default}"
        return text

    def pass_on(self) -> str:
        """The parameter as a call passes it on to the asynchronous method."""
        if self.kind is inspect.Parameter.VAR_POSITIONAL:
            return f"*{self.name}"
        if self.kind is inspect.Parameter.VAR_KEYWORD:
            return f"**{self.name}"
        if self.kind is inspect.Parameter.KEYWORD_ONLY:
            return f"{self.name}={self.name}"
        return self.name


def _annotation(value: object) -> str | None:
    if value is inspect.Parameter.empty:
        return None
    if not isinstance(value, str):
        raise GenerateError(
            f"annotation {value!r} is not a string: the asynchronous modules must use "
            "`from __future__ import annotations`"
        )
    return value


def _function_node(func: Callable[..., Any]) -> ast.FunctionDef | ast.AsyncFunctionDef:
    source = textwrap.dedent(inspect.getsource(func))
    node = ast.parse(source).body[0]
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        raise GenerateError(f"{func.__qualname__} is not a plain def")
    return node


def params_of(func: Callable[..., Any]) -> tuple[list[Param], str | None]:
    """The parameters after ``self`` (defaults as their source text) and the return
    annotation."""
    signature = inspect.signature(func)
    node = _function_node(func)
    args = node.args
    positional = [*args.posonlyargs, *args.args]
    with_defaults = positional[len(positional) - len(args.defaults) :]
    defaults = {a.arg: ast.unparse(d) for a, d in zip(with_defaults, args.defaults, strict=True)}
    for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        if d is not None:
            defaults[a.arg] = ast.unparse(d)
    params = [
        Param(p.name, p.kind, _annotation(p.annotation), defaults.get(p.name))
        for p in list(signature.parameters.values())[1:]
    ]
    return params, _annotation(signature.return_annotation)


def first_paragraph(doc: str | None) -> str:
    """A docstring's first paragraph, cleaned ("" without one)."""
    if not doc:
        return ""
    return inspect.cleandoc(doc).split("\n\n")[0]


def docstring(text: str, indent: str) -> str:
    """A docstring literal of ``text`` at ``indent``, within the line length: a paragraph
    with a line too long (the sentences written here) is filled again, an indented one
    (an ``Args:`` section) has only its long lines wrapped."""
    text = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"').strip()
    width = LINE_LENGTH - len(indent)
    quotes = '"""'
    out: list[str] = []
    for n, paragraph in enumerate(text.split("\n\n")):
        lines = paragraph.splitlines()
        lead = quotes if n == 0 else ""
        if all(len(lead * (i == 0) + line) <= width for i, line in enumerate(lines)):
            out.append(paragraph)
        elif not any(line[:1].isspace() for line in lines):
            filled = textwrap.fill(" ".join(lines), width, initial_indent=lead)
            out.append(filled[len(lead) :])
        else:
            wrapped: list[str] = []
            for line in lines:
                pad = line[: len(line) - len(line.lstrip())]
                wrapped += textwrap.wrap(line, width, subsequent_indent=pad) or [line]
            out.append("\n".join(wrapped))
    lines = "\n\n".join(out).splitlines()
    if len(lines) == 1 and len(lines[0]) + 6 <= width:
        return f"{indent}{quotes}{lines[0]}{quotes}\n"
    body = "\n".join((indent + line) if line else "" for line in lines[1:])
    return f"{indent}{quotes}{lines[0]}\n{body}\n{indent}{quotes}\n"


def method_doc(cls: type, name: str, func: Callable[..., Any], extra: str = "") -> str:
    """The asynchronous method's docstring, saying whose twin this is."""
    owner = func.__qualname__.rpartition(".")[0] or cls.__name__
    ref = f":meth:`{func.__module__}.{owner}.{name}`"
    doc = inspect.cleandoc(func.__doc__) if func.__doc__ else ""
    lead = f"Blocking twin of {ref}{extra}."
    return f"{doc}\n\n{lead}" if doc else lead


def _subscript(annotation: str) -> tuple[str, list[str]] | None:
    """``Outer[A, B]`` -> ("Outer", ["A", "B"]) (a dotted outer name's last part)."""
    tree = ast.parse(annotation, mode="eval").body
    if not isinstance(tree, ast.Subscript):
        return None
    outer = tree.value
    outer_name = outer.attr if isinstance(outer, ast.Attribute) else getattr(outer, "id", "")
    inner = tree.slice
    items = inner.elts if isinstance(inner, ast.Tuple) else [inner]
    return outer_name, [ast.unparse(i) for i in items]


def iterated_type(annotation: str | None, module_name: str) -> tuple[str, str] | None:
    """The item type (and the module its names come from) of an async iterator annotation:
    ``AsyncIterator[X]`` and kin, or a class of the SDK with ``__anext__``; None for any
    other annotation."""
    if annotation is None:
        return None
    parts = _subscript(annotation)
    if parts is not None:
        outer, items = parts
        return (items[0], module_name) if outer in ASYNC_ITERATORS else None
    try:
        tree = ast.parse(annotation, mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(tree, ast.Name):
        return None
    binding = binding_of(module_name, tree.id)
    value = binding.value() if binding is not None else None
    anext_ = getattr(value, "__anext__", None)
    if not inspect.isclass(value) or anext_ is None or not inspect.isfunction(anext_):
        return None
    _, item = params_of(anext_)
    if item is None:
        raise GenerateError(f"{value.__qualname__}.__anext__ has no return annotation")
    return item, anext_.__module__


# -- writing ------------------------------------------------------------------------------


@dataclass
class Writer:
    """The generated module's text, built class by class."""

    imports: Imports
    """The names the classes' signatures read."""
    modules: dict[str, str]
    """Asynchronous module -> its alias in the generated module."""
    twins: dict[type, str]
    """Asynchronous class -> its twin's name."""
    uses: set[str] = field(default_factory=set)
    """The names of OWN_NAMES the twins use."""
    parts: list[str] = field(default_factory=list)
    """The twins' source, a class each."""

    def alias(self, cls: type) -> str:
        """An asynchronous class as the generated module names it (``_admin.Admin``)."""
        return f"{self.modules[cls.__module__]}.{cls.__name__}"

    def use(self, *names: str) -> None:
        """Note names of OWN_NAMES a twin uses."""
        self.uses.update(names)

    def annotations(self, params: list[Param], ret: str | None, module_name: str) -> None:
        """Bind the names the parameters' annotations and defaults and the return
        annotation read."""
        for p in params:
            if p.annotation is not None:
                self.imports.need(p.annotation, module_name, runtime=False)
            if p.default is not None:
                self.imports.need(p.default, module_name, runtime=True)
        if ret is not None:
            self.imports.need(ret, module_name, runtime=False)

    def write_class(self, cls: type) -> None:
        """Write the twin of ``cls``: a subclass of its base's twin when the base has one,
        with the members ``cls`` defines itself."""
        name = self.twins[cls]
        bases = [b for b in cls.__bases__ if b in self.twins]
        base = self.twins[bases[0]] if bases else None
        own = dict(vars(cls))
        out = [f"class {name}({base}):\n" if base else f"class {name}:\n"]
        summary = first_paragraph(cls.__doc__).removesuffix("::").rstrip(":") or cls.__name__
        summary = summary if summary.endswith(".") else summary + "."
        out.append(
            docstring(
                f"{summary}\n\nThe blocking twin of :class:`{cls.__module__}.{cls.__name__}`: "
                "every method runs its asynchronous twin on the SDK's background event loop "
                "and waits for the result (``with`` starts and shuts it down).",
                "    ",
            )
        )
        self.use("ClassVar")
        out.append(
            f"\n    async_class: ClassVar[type[{self.alias(cls)}]] = {self.alias(cls)}\n"
            '    """The asynchronous class this one drives."""\n'
            f"    _client: {self.alias(cls)}\n"
        )
        members: list[str] = []
        if "__init__" in own:
            members.append(self._init(cls))
        elif base is None:
            raise GenerateError(f"{cls.__name__} has no __init__ of its own to make it with")
        members.append(self._async_client(cls))
        for attr in sorted(own):
            value = own[attr]
            if attr.startswith("_") and attr not in ("__aenter__", "__aexit__", "__aiter__"):
                continue
            members.append(self._member(cls, attr, value))
        if (
            "close" not in own
            and base is None
            and inspect.iscoroutinefunction(getattr(cls, "shutdown", None))
            and not hasattr(cls, "close")
        ):
            members.append(self._close(cls))
        self.parts.append("".join(out) + "".join(f"\n{m}" for m in members if m))

    def _init(self, cls: type) -> str:
        init = vars(cls)["__init__"]
        params, _ = params_of(init)
        self.annotations(params, None, init.__module__)
        decl = ", ".join(["self", *self._declarations(params)])
        call = ", ".join([self.alias(cls), *(p.pass_on() for p in params)])
        doc = method_doc(cls, "__init__", init, "; the client is made on the SDK's loop")
        return (
            f"    def __init__({decl}) -> None:\n"
            + docstring(doc, "        ")
            + f"        self._client = call_blocking({call})\n"
        )

    def _async_client(self, cls: type) -> str:
        return (
            "    @property\n"
            f"    def async_client(self) -> {self.alias(cls)}:\n"
            '        """The asynchronous client this object drives, on the SDK\'s background '
            'loop."""\n'
            "        return self._client\n"
        )

    @staticmethod
    def _declarations(params: list[Param]) -> list[str]:
        """Parameter declarations with ``/`` and ``*`` where the kinds change."""
        out: list[str] = []
        kinds = [p.kind for p in params]
        for i, p in enumerate(params):
            if p.kind is inspect.Parameter.KEYWORD_ONLY and (
                i == 0
                or kinds[i - 1]
                not in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.VAR_POSITIONAL)
            ):
                out.append("*")
            out.append(p.declare())
            if p.kind is inspect.Parameter.POSITIONAL_ONLY and (
                i + 1 == len(params) or kinds[i + 1] is not inspect.Parameter.POSITIONAL_ONLY
            ):
                out.append("/")
        return out

    def _member(self, cls: type, attr: str, value: object) -> str:
        if isinstance(value, property):
            return self._property(cls, attr, value)
        if isinstance(value, staticmethod | classmethod):
            return ""  # reached through the class; nothing runs on the loop
        if not inspect.isfunction(value):
            return ""  # class-level data: read through async_class
        params, ret = params_of(value)
        module_name = value.__module__
        if attr == "__aenter__":
            return self._enter(cls, value)
        if attr == "__aexit__":
            return self._exit(cls, value, params)
        self.annotations(params, None, module_name)
        decl = ", ".join(["self", *self._declarations(params)])
        call = f"self._client.{attr}({', '.join(p.pass_on() for p in params)})"
        name = "__iter__" if attr == "__aiter__" else attr
        if inspect.iscoroutinefunction(value):
            if ret is not None:
                self.imports.need(ret, module_name, runtime=False)
            returns = f" -> {ret}" if ret is not None else ""
            body = f"        return run_blocking({call})\n"
            self.use("run_blocking")
            doc = method_doc(cls, attr, value)
        elif inspect.isasyncgenfunction(value) or iterated_type(ret, module_name) is not None:
            found = iterated_type(ret, module_name)
            if found is None:
                raise GenerateError(f"{cls.__name__}.{attr} yields without an annotation")
            item, item_module = found
            self.imports.need(item, item_module, runtime=False)
            self.use("Iterator", "iterate_blocking")
            returns = f" -> Iterator[{item}]"
            body = f"        return iterate_blocking(lambda: {call})\n"
            doc = method_doc(cls, attr, value, ", as a plain iterator (``for ... in``)")
        elif ret is not None and (parts := _subscript(ret)) is not None and parts[0] in STARTED:
            item = parts[1][0]
            self.imports.need(item, module_name, runtime=False)
            self.imports.runtime["concurrent"] = Binding("concurrent.futures", None, "concurrent")
            self.use("future_blocking")
            returns = f" -> concurrent.futures.Future[{item}]"
            body = f"        return future_blocking(lambda: {call})\n"
            doc = method_doc(
                cls,
                attr,
                value,
                "; it returns at once a concurrent.futures.Future of the task's result, "
                "and a callback runs on the SDK's loop",
            )
        else:
            if ret is not None:
                self.imports.need(ret, module_name, runtime=False)
            returns = f" -> {ret}" if ret is not None else ""
            args = ", ".join([f"self._client.{attr}", *(p.pass_on() for p in params)])
            body = f"        return call_blocking({args})\n"
            self.use("call_blocking")
            doc = method_doc(cls, attr, value, ", called on the SDK's loop")
        return f"    def {name}({decl}){returns}:\n" + docstring(doc, "        ") + body

    def _property(self, cls: type, attr: str, prop: property) -> str:
        if prop.fget is None:
            return ""
        _, ret = params_of(prop.fget)
        if ret is not None:
            self.imports.need(ret, prop.fget.__module__, runtime=False)
        returns = f" -> {ret}" if ret is not None else ""
        doc = first_paragraph(prop.fget.__doc__) or f"The client's {attr}."
        out = (
            "    @property\n"
            f"    def {attr}(self){returns}:\n"
            + docstring(doc, "        ")
            + f"        return self._client.{attr}\n"
        )
        if prop.fset is not None:
            raise GenerateError(f"{cls.__name__}.{attr} has a setter; the generator has none")
        return out

    def _enter(self, cls: type, func: Callable[..., Any]) -> str:
        self.use("Self", "run_blocking")
        doc = (
            f"Start the client (:meth:`{func.__module__}.{func.__qualname__}`) and return "
            "it, for ``with``."
        )
        return (
            "    def __enter__(self) -> Self:\n"
            + docstring(doc, "        ")
            + "        run_blocking(self._client.__aenter__())\n"
            + "        return self\n"
        )

    def _exit(self, cls: type, func: Callable[..., Any], params: list[Param]) -> str:
        self.annotations(params, None, func.__module__)
        decl = ", ".join(["self", *self._declarations(params)])
        call = ", ".join(p.pass_on() for p in params)
        self.use("run_blocking")
        doc = (
            f"Shut the client down as :meth:`{func.__module__}.{func.__qualname__}` does "
            "(an exception leaving the block is passed on to it)."
        )
        return (
            f"    def __exit__({decl}) -> None:\n"
            + docstring(doc, "        ")
            + f"        run_blocking(self._client.__aexit__({call}))\n"
        )

    def _close(self, cls: type) -> str:
        self.use("run_blocking")
        doc = (
            "Shut the client down: the same as :meth:`shutdown` (the asynchronous class "
            "has no ``close`` of its own)."
        )
        return (
            "    def close(self) -> None:\n"
            + docstring(doc, "        ")
            + "        run_blocking(self._client.shutdown())\n"
        )


HEADER: Final = '''"""Blocking twins of the SDK's clients, for code without asyncio: the same
names, the same methods with the same parameters, typed, and the same data types::

    from rocketq.sync import Message, Producer

    with Producer(group="pg", namesrv="127.0.0.1:9876") as producer:
        producer.send(Message(topic="T", body=b"hi"))

Every client object lives on the SDK's one event loop, in a background thread
(``rocketq.sdk.background_loop``); a method call runs the asynchronous method there and
waits for its result. ``send_async`` returns a :class:`concurrent.futures.Future`; a
consumer is iterated with a plain ``for`` where the asynchronous one takes ``async for``.

Generated by ``{command}`` from the asynchronous classes: do not edit
it by hand; run the command again after changing them.
"""

'''


def classes() -> list[type]:
    """The asynchronous classes of CLASSES."""
    return [getattr(importlib.import_module(m), n) for m, n in CLASSES]


def render_source(targets: list[type] | None = None) -> str:
    """The module's text before formatting (of the SDK's classes, or of ``targets``)."""
    targets = classes() if targets is None else targets
    modules = {cls.__module__: "_" + cls.__module__.rpartition(".")[2] for cls in targets}
    twins = {cls: cls.__name__ for cls in targets}
    imports = Imports(reserved={*twins.values(), *modules.values(), *HELPER_NAMES})
    writer = Writer(imports, modules, twins)
    for cls in targets:
        writer.write_class(cls)
    lines = ["from __future__ import annotations", ""]
    runtime = dict(imports.runtime)
    for name in sorted(writer.uses):
        own = Binding(*OWN_NAMES[name], name)
        known = runtime.get(name) or imports.typing.pop(name, None)
        if known is not None and known != own and known.value() is not own.value():
            raise GenerateError(
                f"an asynchronous module binds {name!r} as {known.statement()!r}; the blocking "
                f"module needs it as {own.statement()!r}"
            )
        runtime[name] = own
    for module_name, alias in sorted(modules.items()):
        package, _, leaf = module_name.rpartition(".")
        runtime[alias] = Binding(package, leaf, alias) if package else Binding(leaf, None, alias)
    if imports.typing:
        runtime["TYPE_CHECKING"] = Binding("typing", "TYPE_CHECKING", "TYPE_CHECKING")
    lines += sorted(b.statement() for b in runtime.values())
    if imports.typing:
        lines += ["", "if TYPE_CHECKING:"]
        lines += sorted(f"    {b.statement()}" for b in imports.typing.values())
    body = "\n\n".join(writer.parts)
    names = ", ".join(f'"{n}"' for n in sorted(twins.values()))
    return (
        HEADER.format(command=COMMAND)
        + "\n".join(lines)
        + "\n\n\n"
        + body
        + f"\n\n__all__ = [{names}]\n"
    )


def _ruff() -> str:
    found = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if found is None:
        raise GenerateError("ruff is not installed; it formats the generated module")
    return found


def _compiled(targets: list[type]) -> bool:
    """Whether a class comes from a compiled module (``make compiled``), whose methods
    have no source to read."""
    return any(
        not str(getattr(sys.modules[cls.__module__], "__file__", "")).endswith(".py")
        for cls in targets
    )


def _render_pure() -> str:
    """:func:`render_source` run on the pure package: a tree of links to the sources alone
    (tools/link_tree.py), first on the path of a child interpreter."""
    if str(ROOT) not in sys.path:  # run as a script: the repository is not on the path
        sys.path.append(str(ROOT))
    from tools.link_tree import build

    with tempfile.TemporaryDirectory(prefix="gen-blocking-") as tmp:
        build(Path(tmp))
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from tools import gen_blocking; "
                "sys.stdout.write(gen_blocking.render_source())",
            ],
            cwd=tmp,
            env={**os.environ, "PYTHONPATH": os.pathsep.join([tmp, str(ROOT)])},
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        raise GenerateError(f"the pure package's classes did not render: {done.stderr.strip()}")
    return done.stdout


def render(targets: list[type] | None = None) -> str:
    """The module's text, import-sorted and formatted as ``ruff`` would leave it (of a
    compiled build, as its pure package writes it)."""
    pure = targets is None and _compiled(classes())
    text = _render_pure() if pure else render_source(targets)
    ruff = _ruff()
    for args in (
        ["check", "--fix", "--select", "I", "--exit-zero", "--quiet"],
        ["format"],
    ):
        done = subprocess.run(
            [ruff, *args, "--stdin-filename", str(OUT), "-"],
            input=text,
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=False,
        )
        if done.returncode != 0:
            raise GenerateError(f"ruff {args[0]} failed: {done.stderr.strip()}")
        text = done.stdout
    return text


def main(argv: list[str] | None = None) -> int:
    """Write (or with ``--check``, compare) ``sdk/blocking.py``; the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--check", action="store_true", help="exit 1 if the file differs")
    options = parser.parse_args(argv)
    try:
        text = render()
    except GenerateError as exc:
        print(f"gen_blocking: {exc}", file=sys.stderr)
        return 2
    if options.check:
        if OUT.read_text() != text:
            print(f"{OUT.relative_to(ROOT)} is stale: run `{COMMAND}`", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
