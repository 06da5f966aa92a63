"""The model every layer shares: messages and their record layout, message ids, errors,
config files, the SQL92 filter, metric tables, small asyncio and file helpers. Imports
nothing else of rocketq."""
