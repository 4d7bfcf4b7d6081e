"""The ``rmqkafka`` DataSource: Spark's entry point to the readers and writers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource

from .errors import KafkaOptionError
from .options import include_headers, parse_read_options, parse_write_options
from .schema import ddl, spark_schema

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from .reader import KafkaBatchReader
    from .stream_reader import KafkaStreamReader
    from .writer import KafkaBatchWriter, KafkaStreamWriter

SHORT_NAME = "rmqkafka"


class KafkaDataSource(DataSource):
    """``format("rmqkafka")``: Kafka-protocol topics, the built-in source's options and schema.

    ``schema()`` runs when a read is defined (``load()``), so option errors surface there,
    as with the built-in source; the reader-specific rules run when the query is planned.
    """

    @classmethod
    def name(cls) -> str:
        return SHORT_NAME

    def schema(self) -> str:
        parse_read_options(self.options, streaming=None)  # fail at load() on bad options
        return ddl(include_headers(self.options))

    def _check_schema(self, schema: StructType) -> None:
        expected = spark_schema(include_headers(self.options))
        if schema.simpleString() != expected.simpleString():
            raise KafkaOptionError(
                "the rmqkafka source has a fixed schema and cannot be read with a custom one "
                f"(expected {expected.simpleString()}, got {schema.simpleString()}); drop "
                ".schema(...) and cast or select columns after load()"
            )

    def reader(self, schema: StructType) -> KafkaBatchReader:
        from .reader import KafkaBatchReader

        self._check_schema(schema)
        return KafkaBatchReader(parse_read_options(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType) -> KafkaStreamReader:
        from .stream_reader import KafkaStreamReader

        self._check_schema(schema)
        return KafkaStreamReader(parse_read_options(self.options, streaming=True), schema)

    def writer(self, schema: StructType, overwrite: bool) -> KafkaBatchWriter:
        from .writer import KafkaBatchWriter

        if overwrite:
            raise KafkaOptionError(
                "save mode 'overwrite' is not allowed for Kafka (records cannot be replaced); "
                "use .mode('append')"
            )
        return KafkaBatchWriter(parse_write_options(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> KafkaStreamWriter:
        from .writer import KafkaStreamWriter

        return KafkaStreamWriter(parse_write_options(self.options), schema)
