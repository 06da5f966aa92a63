"""Who may do what: request signatures, users and ACL policies, and the check a server runs
before it answers a request (RocketMQ 4.x signatures on the wire, RocketMQ 5.3's ACL 2.0 model)."""
