"""docs/reference/configuration.md is what tools/gen_config_reference.py makes from the config
dataclasses now, and it lists every key of every server config with its default."""

from __future__ import annotations

import dataclasses

from rocketq.broker.config import BrokerConfig
from rocketq.common.config import ServerBoundsConfig, StoreConfig
from rocketq.nameserver.config import NameServerConfig
from tools import gen_config_reference
from tools.gen_config_reference import OUT, field_docs, render


def test_committed_page_is_what_the_script_writes_now() -> None:
    text, _ = render()
    assert OUT.read_text(encoding="utf-8") == text, (
        "docs/reference/configuration.md is stale: run `python tools/gen_config_reference.py`"
    )


def test_check_mode_agrees() -> None:
    assert gen_config_reference.main(["--check"]) == 0


def test_every_key_is_listed_with_its_default() -> None:
    text, _ = render()
    for cls in (ServerBoundsConfig, NameServerConfig, BrokerConfig, StoreConfig):
        for f in dataclasses.fields(cls):
            row = f"| `{f.name}` |"
            assert row in text, f"{cls.__name__}.{f.name} is missing from the page"
    assert '| `flush_disk_type` | one of `ASYNC_FLUSH`, `SYNC_FLUSH` | `"ASYNC_FLUSH"` |' in text
    assert "| `ha_listen_port` | int or unset | unset (listen_port + 1) | 0 to 65535 |" in text
    # A home directory is written as ~, so the page does not depend on who generates it.
    assert '`"~/store"`' in text


def test_field_docs_are_the_comments_above_the_fields() -> None:
    docs = field_docs(StoreConfig)
    assert docs["max_message_size"] == "Largest message body accepted, in bytes (4 MiB)."
    # A field right below another, without a comment of its own, shares that one's.
    bounds = field_docs(ServerBoundsConfig)
    assert bounds["write_buffer_low_water_mark"] == bounds["write_buffer_high_water_mark"]
    broker = field_docs(BrokerConfig)
    assert broker["dledger_max_vote_interval"] == broker["dledger_min_vote_interval"]
    assert broker["dledger_min_vote_interval"].startswith("ms, the random pause")


def test_a_field_without_any_doc_is_listed_empty() -> None:
    @dataclasses.dataclass(frozen=True)
    class Sample:
        # Documented.
        a: int = 1

        b: int = 2
        c: str = "x"
        """A docstring after the field."""

    docs = field_docs(Sample)
    assert docs == {"a": "Documented.", "b": "", "c": "A docstring after the field."}
