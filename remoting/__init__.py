"""RocketMQ's remoting protocol: RemotingCommand frames over TCP, the request codes, the
fastjson bodies, the route and registration codecs, and the bounds a server keeps.

Imports only the shared kernel (``rocketq.common``)."""
