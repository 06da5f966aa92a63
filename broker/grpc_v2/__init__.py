"""RocketMQ 5's ``apache.rocketmq.v2.MessagingService`` in the broker process (RocketMQ 5's
"local" proxy mode): :mod:`rocketq.broker.grpc_v2.endpoint`. The ``*_pb2*`` modules are
generated from apache/rocketmq-apis v2.1.2 by ``make proto`` (tools/gen_proto.py)."""
