"""The broker's remoting request handlers: each turns RocketMQ requests (header fields and
body) into calls of the broker's processors and their results into responses."""
