"""Build helpers run by ``make``; not installed."""
