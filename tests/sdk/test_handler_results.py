"""What a push consumer makes of its handler's answer: a ConsumeResult is taken as it is;
None (or anything else) is an error of the handler: the batch goes back for retry, as
when the handler raises, and the error is logged once per handler, saying how to fix it."""

from __future__ import annotations

import logging

import pytest

from rocketq.common.exceptions import ClientStateError
from rocketq.common.message import MessageExt
from rocketq.common.record import decode_record, encode_record
from rocketq.sdk.consumer_types import ConsumeResult
from rocketq.sdk.push_consumer import PushConsumer


def batch(n: int = 1) -> list[MessageExt]:
    return [
        decode_record(
            encode_record(
                topic=b"T",
                body=b"x",
                properties=b"UNIQ_KEY\x01ID" + str(i).encode() + b"\x02",
                queue_offset=i,
                born_timestamp=1,
                born_host=b"\x7f\0\0\1\0\0\0\1",
            )
        )
        for i in range(n)
    ]


@pytest.mark.parametrize("orderly", [False, True])
async def test_a_handler_returning_none_retries_and_logs_one_error(
    orderly: bool, caplog: pytest.LogCaptureFixture
) -> None:
    consumer = PushConsumer("cg", "127.0.0.1:1", orderly=orderly)

    async def forgets_to_return(msgs: list[MessageExt]) -> None:
        pass

    consumer.on_message(forgets_to_return)  # type: ignore[arg-type]
    caplog.set_level(logging.DEBUG, logger="rocketq.sdk")
    service = consumer.consume_service
    assert await service.run_handler(batch()) is ConsumeResult.RECONSUME_LATER
    assert await service.run_handler(batch()) is ConsumeResult.RECONSUME_LATER
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    text = errors[0].getMessage()
    assert "forgets_to_return" in text and "returned None" in text
    assert "ConsumeResult.SUCCESS" in text and "goes back for retry" in text


async def test_a_plain_function_returning_none_is_the_same_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    consumer = PushConsumer("cg", "127.0.0.1:1")
    consumer.on_message(lambda msgs: None)  # type: ignore[arg-type, return-value]
    consumer._pool = None  # the loop's default executor runs it
    assert await consumer.consume_service.run_handler(batch()) is ConsumeResult.RECONSUME_LATER
    assert [r.levelno for r in caplog.records].count(logging.ERROR) == 1


async def test_a_consume_result_is_taken_as_it_is(caplog: pytest.LogCaptureFixture) -> None:
    consumer = PushConsumer("cg", "127.0.0.1:1")
    answers = iter([ConsumeResult.SUCCESS, ConsumeResult.RECONSUME_LATER])
    consumer.on_message(lambda msgs: next(answers))
    service = consumer.consume_service
    assert await service.run_handler(batch()) is ConsumeResult.SUCCESS
    assert await service.run_handler(batch()) is ConsumeResult.RECONSUME_LATER
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_consumer_with_a_handler_or_not_started_cannot_be_iterated() -> None:
    consumer = PushConsumer("cg", "127.0.0.1:1")
    with pytest.raises(ClientStateError, match="iterate a started consumer"):
        consumer.messages()
    consumer.on_message(lambda msgs: ConsumeResult.SUCCESS)
    with pytest.raises(ClientStateError, match="has a handler"):
        aiter(consumer)
    with pytest.raises(ClientStateError, match="has a handler"):
        consumer.reconsume_later(batch()[0])
