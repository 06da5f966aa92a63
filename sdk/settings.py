"""How every SDK client takes its settings: a config object or keyword settings (never
both), unknown settings refused with a did-you-mean, and the nameserver address from the
``NAMESRV_ADDR`` environment variable when none is given (as the ``rocketq`` CLI and
RocketMQ's clients read it).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, TypeVar

from rocketq.common.exceptions import ConfigError

NAMESRV_ENV: Final = "NAMESRV_ADDR"
"""The environment variable a client reads its nameserver address(es) from when it is
given none: ``host:port``, or several separated by ``;``."""


if TYPE_CHECKING:
    from _typeshed import DataclassInstance

C = TypeVar("C", bound="DataclassInstance")


def resolve_namesrv(namesrv: str | None, owner: str) -> str:
    """The nameserver address(es) a client of kind ``owner`` uses: ``namesrv`` when given,
    else ``NAMESRV_ADDR``.

    Raises:
        ConfigError: When neither says where the nameservers are.
    """
    if namesrv is not None and namesrv.strip():
        return namesrv
    env = os.environ.get(NAMESRV_ENV, "").strip()
    if env:
        return env
    raise ConfigError(
        f"{owner} has no nameserver address: pass namesrv='host:9876' (several: "
        f"'a:9876;b:9876') or set {NAMESRV_ENV}"
    )


def check_settings(cls: type[Any], settings: Mapping[str, object], owner: str) -> None:
    """Refuse a setting that is not a field of the config dataclass ``cls``.

    Raises:
        TypeError: Naming the unknown setting and the closest known ones.
    """
    known = [f.name for f in dataclasses.fields(cls)]
    for key in settings:
        if key in known:
            continue
        close = difflib.get_close_matches(key, known, n=3)
        if close:
            hint = "did you mean " + " or ".join(repr(c) for c in close) + "?"
        else:
            hint = f"the settings of {cls.__name__} are: " + ", ".join(known)
        raise TypeError(f"{owner}: unknown setting {key!r}; {hint}")


def make_config(cls: type[C], config: C | None, settings: Mapping[str, object], owner: str) -> C:
    """The config a client of kind ``owner`` runs with: ``config`` as given, or ``cls``
    built from ``settings``.

    Raises:
        TypeError: When both are given (a setting would be lost), when ``config`` is not a
            ``cls``, or when a setting is unknown (with a did-you-mean).
    """
    if config is not None:
        if settings:
            names = ", ".join(sorted(settings))
            raise TypeError(
                f"{owner}: give either config= or settings ({names}), not both; to change "
                f"a config, pass config=dataclasses.replace(config, {next(iter(settings))}=...)"
            )
        if not isinstance(config, cls):
            raise TypeError(
                f"{owner}: config must be a {cls.__name__}, not {type(config).__name__}"
            )
        return config
    check_settings(cls, settings, owner)
    return cls(**settings)
