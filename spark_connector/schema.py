"""The output schema — exactly the built-in Kafka source's — and its Arrow twin.

``key binary, value binary, topic string, partition int, offset long, timestamp timestamp,
timestampType int`` plus ``headers array<struct<key:string,value:binary>>`` with
``includeHeaders=true``. ``timestampType`` is Kafka's id: 0 = CreateTime,
1 = LogAppendTime, -1 = none.

Spark accepts ``pyarrow.RecordBatch`` es from ``read()`` only if their Arrow schema equals
``to_arrow_schema(spark_schema, timezone="UTC")`` exactly, so :func:`arrow_schema` asks
PySpark for it instead of spelling it out (field names such as the list's ``element``
are PySpark's choice).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow
    from pyspark.sql.types import StructType

BASE_DDL = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
HEADERS_DDL = "headers array<struct<key:string,value:binary>>"
COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")


def ddl(include_headers: bool) -> str:
    """The schema as a DDL string (what ``DataSource.schema()`` returns)."""
    return f"{BASE_DDL}, {HEADERS_DDL}" if include_headers else BASE_DDL


def spark_schema(include_headers: bool) -> StructType:
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    return StructType(fields)


def arrow_schema(schema: StructType) -> pyarrow.Schema:
    """The Arrow schema Spark requires of record batches for ``schema``."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")
