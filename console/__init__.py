"""The web console (``rocketq console``): RocketMQ Dashboard's pages in the browser, served
by Starlette over the SDK's :class:`~rocketq.sdk.admin.Admin`."""
