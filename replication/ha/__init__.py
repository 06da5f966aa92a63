"""Classic master/slave HA: a slave streams the master's CommitLog and acknowledges offsets."""
