"""Runnable examples of the ``rmqkafka`` PySpark data source.

``python -m rmqkafka.spark_connector.examples.order_pipeline --help`` — tagged order events in,
per-tag, per-window statistics out; see that module's docstring.
"""
