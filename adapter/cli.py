"""The ``rmqk`` command line: one click group that gathers the sub-commands.

This module only assembles the group; each command lives in its own ``adapter/cli_*.py``
module (``cli_serve`` today; ``rmqk topics ...`` and ``rmqk groups ...`` are added the same
way with ``main.add_command``). Plain click rather than typer: typer now imports pydantic,
which alone would add ~0.1 s to every broker start, and start-up time is a feature here.
The broker itself is imported only when ``serve`` actually starts it, so ``rmqk --help`` and
configuration errors are fast.

Output conventions shared by all commands: stdout carries only results meant for scripts
(for ``serve``, exactly the line ``rmqk broker started on HOST:PORT``); logs and errors go
to stderr; an error the user can fix prints one line ``rmqk: error: ...`` and exits 2.
"""

from __future__ import annotations

import click

from adapter.cli_serve import serve


@click.group(
    name="rmqk",
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
)
def main() -> None:
    """rmqkafka: a Kafka-protocol broker with Apache RocketMQ message semantics."""


main.add_command(serve)
