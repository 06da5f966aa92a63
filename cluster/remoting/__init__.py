"""RocketMQ's remoting protocol: RemotingCommand frames over TCP."""
