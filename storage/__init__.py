"""The message store: CommitLog, ConsumeQueue, IndexFile, checkpoint, recovery, flush and
retention, in RocketMQ 4.x's on-disk layout.

No networking and no gRPC here. May import only ``cluster``'s pure data model, record
codec, config and errors.
"""
