from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RaftMessage(_message.Message):
    __slots__ = ("sender", "term", "vote_request", "vote_response", "timeout_now")
    SENDER_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    VOTE_REQUEST_FIELD_NUMBER: _ClassVar[int]
    VOTE_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_NOW_FIELD_NUMBER: _ClassVar[int]
    sender: str
    term: int
    vote_request: RaftVoteRequest
    vote_response: RaftVoteResponse
    timeout_now: RaftTimeoutNow
    def __init__(self, sender: _Optional[str] = ..., term: _Optional[int] = ..., vote_request: _Optional[_Union[RaftVoteRequest, _Mapping]] = ..., vote_response: _Optional[_Union[RaftVoteResponse, _Mapping]] = ..., timeout_now: _Optional[_Union[RaftTimeoutNow, _Mapping]] = ...) -> None: ...

class RaftTimeoutNow(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RaftVoteRequest(_message.Message):
    __slots__ = ("last_index", "last_term", "pre", "transfer")
    LAST_INDEX_FIELD_NUMBER: _ClassVar[int]
    LAST_TERM_FIELD_NUMBER: _ClassVar[int]
    PRE_FIELD_NUMBER: _ClassVar[int]
    TRANSFER_FIELD_NUMBER: _ClassVar[int]
    last_index: int
    last_term: int
    pre: bool
    transfer: bool
    def __init__(self, last_index: _Optional[int] = ..., last_term: _Optional[int] = ..., pre: _Optional[bool] = ..., transfer: _Optional[bool] = ...) -> None: ...

class RaftVoteResponse(_message.Message):
    __slots__ = ("granted", "pre", "reason")
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    PRE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    granted: bool
    pre: bool
    reason: str
    def __init__(self, granted: _Optional[bool] = ..., pre: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...
