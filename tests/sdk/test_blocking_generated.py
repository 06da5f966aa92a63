"""``sdk/blocking.py`` (``rocketq.sync``'s twins) is what ``tools/gen_blocking.py`` writes
from the asynchronous classes as they are now, and every twin is written out and typed:
each public method of the asynchronous class has a twin with the same parameter names,
kinds, defaults and annotations, returning what the coroutine returns (a plain iterator for
an async one, a concurrent future for a task), with ``Any`` only where the asynchronous
signature has it."""

from __future__ import annotations

import ast
import importlib
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import rocketq.sync
from rocketq.sdk import blocking
from rocketq.sdk.background_loop import background_loop
from tools import gen_blocking

ASYNC_CLASSES = gen_blocking.classes()
PAIRS = [(cls, getattr(blocking, cls.__name__)) for cls in ASYNC_CLASSES]


def test_the_committed_module_is_what_the_generator_writes_now() -> None:
    with open(gen_blocking.OUT) as fh:
        committed = fh.read()
    assert committed == gen_blocking.render(), (
        "sdk/blocking.py is stale: the asynchronous SDK changed since it was generated; "
        f"run `{gen_blocking.COMMAND}`"
    )


def test_rocketq_sync_exports_the_generated_twins() -> None:
    for cls, twin in PAIRS:
        assert getattr(rocketq.sync, cls.__name__) is twin
        assert twin.async_class is cls and twin is not cls
    assert rocketq.sync.TransactionProducer.__mro__[1] is rocketq.sync.Producer


DUNDERS = ("__init__", "__aenter__", "__aexit__", "__aiter__", "__enter__", "__exit__", "__iter__")


def public_members(cls: type) -> dict[str, Any]:
    """Public attributes as the class has them, its bases' included (with the dunders of
    construction, ``with`` and iteration)."""
    return {
        name: inspect.getattr_static(cls, name)
        for name in dir(cls)
        if not name.startswith("_") or name in DUNDERS
    }


def params(func: Callable[..., Any]) -> list[tuple[str, Any, Any, Any]]:
    return [
        (p.name, p.kind, p.default, p.annotation)
        for p in inspect.signature(func).parameters.values()
    ]


def item_of(annotation: str) -> str:
    """``Iterator[X]`` -> ``X``."""
    node = ast.parse(annotation, mode="eval").body
    assert isinstance(node, ast.Subscript), annotation
    return ast.unparse(node.slice)


def any_count(annotation: object) -> int:
    if not isinstance(annotation, str):
        return 0
    tree = ast.parse(annotation, mode="eval")
    return sum(isinstance(n, ast.Name) and n.id == "Any" for n in ast.walk(tree))


@pytest.mark.parametrize(("cls", "twin"), PAIRS, ids=lambda c: c.__name__)
def test_every_public_method_has_a_twin_with_its_signature(cls: type, twin: type) -> None:
    twins = public_members(twin)
    for name, member in public_members(cls).items():
        if isinstance(member, property):
            assert isinstance(twins.get(name), property), f"{cls.__name__}.{name}"
            assert twins[name].fget.__doc__, f"{cls.__name__}.{name} has no docstring"
            continue
        if not inspect.isfunction(member):
            continue
        target = {"__aenter__": "__enter__", "__aexit__": "__exit__", "__aiter__": "__iter__"}
        twin_name = target.get(name, name)
        assert twin_name in twins, f"{twin.__name__} has no {twin_name} (the twin of {name})"
        made = twins[twin_name]
        assert inspect.isfunction(made) and not inspect.iscoroutinefunction(made)
        assert made.__doc__ and made.__doc__.strip(), f"{twin.__name__}.{twin_name}: no doc"
        if name == "__aenter__":
            assert inspect.signature(made).return_annotation == "Self"
            continue
        assert params(made) == params(member), f"{twin.__name__}.{twin_name}"
        ours = inspect.signature(made).return_annotation
        theirs = inspect.signature(member).return_annotation
        if name == "__init__":
            assert ours == theirs == "None"
        elif inspect.iscoroutinefunction(member):
            assert ours == theirs, f"{twin.__name__}.{name} returns {ours}, not {theirs}"
        elif inspect.isasyncgenfunction(member) or ours.startswith("Iterator["):
            assert ours.startswith("Iterator["), f"{twin.__name__}.{twin_name}"
            if theirs.startswith("AsyncIterator["):
                assert item_of(ours) == item_of(theirs)
        elif theirs.startswith(("asyncio.Task[", "Task[")):
            assert ours == f"concurrent.futures.Future[{item_of(theirs)}]"
        else:
            assert ours == theirs, f"{twin.__name__}.{name} returns {ours}, not {theirs}"
        for (_, _, _, a), (_, _, _, b) in zip(params(made), params(member), strict=True):
            assert any_count(a) == any_count(b)
        assert any_count(ours) == any_count(theirs)


@pytest.mark.parametrize(("cls", "twin"), PAIRS, ids=lambda c: c.__name__)
def test_twins_are_fully_annotated(cls: type, twin: type) -> None:
    for name, member in vars(twin).items():
        if not inspect.isfunction(member):
            continue
        signature = inspect.signature(member)
        assert signature.return_annotation is not inspect.Signature.empty, name
        for p in list(signature.parameters.values())[1:]:
            assert p.annotation is not inspect.Parameter.empty, f"{name}({p.name})"
    assert (twin.__doc__ and cls.__name__ in twin.__doc__) or twin.async_class is cls


def test_context_managers_and_close_exist_everywhere() -> None:
    for _, twin in PAIRS:
        assert callable(twin.__enter__) and callable(twin.__exit__)
        assert callable(twin.close)


FAKE_SDK = '''
"""An asynchronous client for the generator's test."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

DEFAULT_KEY = "k"


class Client:
    """A client."""

    def __init__(self, name: str, *, limit: int = 3) -> None:
        self.name = name
        self.limit = limit
        self.loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        """Start."""
        self.loop = asyncio.get_running_loop()

    async def shutdown(self) -> None:
        """Stop."""

    async def __aenter__(self) -> Client:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    async def get(
        self, key: str = DEFAULT_KEY, /, *rest: str, scale: int = 2, **extra: Any
    ) -> dict[str, int]:
        """Look ``key`` up."""
        await asyncio.sleep(0)
        return {key: len(key) * scale, **{r: 0 for r in rest}}

    def tag(self, text: str) -> str:
        """On the loop, so the loop is there."""
        asyncio.get_running_loop()
        return f"{self.name}:{text}"

    def later(self, n: int) -> asyncio.Task[int]:
        """A task."""
        async def double() -> int:
            return 2 * n
        return asyncio.ensure_future(double())

    async def items(self) -> AsyncIterator[int]:
        """Count up to the limit."""
        for i in range(self.limit):
            yield i

    @property
    def label(self) -> str:
        """The name."""
        return self.name
'''


def test_the_generator_writes_a_working_typed_twin_of_any_async_class(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A class the generator has never seen: its twin has the class's signatures and runs
    on the SDK's background loop."""
    (tmp_path / "fake_async_sdk.py").write_text(FAKE_SDK)
    monkeypatch.syspath_prepend(str(tmp_path))
    fake = importlib.import_module("fake_async_sdk")
    text = gen_blocking.render([fake.Client])
    assert (
        "    def get(\n        self, key: str = DEFAULT_KEY, /, *rest: str, scale: int = 2, "
        "**extra: Any\n    ) -> dict[str, int]:"
    ) in text
    assert "def later(self, n: int) -> concurrent.futures.Future[int]:" in text
    assert "def items(self) -> Iterator[int]:" in text
    assert "def close(self) -> None:" in text
    namespace: dict[str, Any] = {}
    exec(compile(text, "generated_fake.py", "exec"), namespace)
    twin = namespace["Client"]
    assert params(twin.get) == params(fake.Client.get)
    with twin("c", limit=4) as client:
        assert client.async_client.loop is background_loop()
        assert client.get("ab", "x", scale=3) == {"ab": 6, "x": 0}
        assert client.tag("t") == "c:t"
        assert client.later(21).result(timeout=5) == 42
        assert list(client.items()) == [0, 1, 2, 3]
        assert client.label == "c"
