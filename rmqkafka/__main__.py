"""``python -m rmqkafka ...`` runs the ``rmqk`` command line (the same as the console script).

The CLI is imported inside :func:`_run`, not at module level, so that importing this module
costs nothing; :class:`rmqkafka.EmbeddedBroker` starts brokers this way so that it needs no
installed console script, only the interpreter that runs the tests.
"""

from __future__ import annotations


def _run() -> None:
    from rmqkafka.cli import main

    main(prog_name="rmqk")


if __name__ == "__main__":
    _run()
