"""rmqkafka.rmqsemantics: RocketMQ message semantics on Kafka records.

This layer sits between the Kafka protocol handlers (:mod:`rmqkafka.adapter`) and the
commitlog (:mod:`rmqkafka.storage`): it holds the RocketMQ rules that decide what a record
means beyond its bytes, written without I/O so that the handlers can call them on the records
they append and fetch. It may use :mod:`rmqkafka.storage` but never the adapter.

So far it holds :mod:`.filters`, the expressions of subscription views: RocketMQ tag
expressions and SQL92 expressions over record headers, compiled once and applied per record.
Views themselves (their topics, Fetch over them) are not wired into the broker yet.
"""
