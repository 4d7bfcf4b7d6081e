"""The ``rmqk`` command line: one typer app that groups sub-commands.

This module only assembles the app; each command lives in its own ``adapter/cli_*.py``
module (``cli_serve`` today; ``rmqk topics ...`` and ``rmqk groups ...`` will be added as
sub-apps with ``app.add_typer(topics_app, name="topics")``). Nothing heavy is imported here:
the broker itself is imported only when ``serve`` actually starts it, so ``rmqk --help`` and
configuration errors are fast.

Output conventions shared by all commands: stdout carries only results meant for scripts
(for ``serve``, exactly the line ``rmqk broker started on HOST:PORT``); logs and errors go
to stderr; an error the user can fix prints one line ``rmqk: error: ...`` and exits 2.
Rich formatting is switched off so that output is plain and stable for scripts.
"""

from __future__ import annotations

import typer

from adapter.cli_serve import serve

app = typer.Typer(
    name="rmqk",
    help="rmqkafka: a Kafka-protocol broker with Apache RocketMQ message semantics.",
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """rmqkafka: a Kafka-protocol broker with Apache RocketMQ message semantics."""
    # A callback keeps typer in "group" mode, so ``rmqk serve`` stays a sub-command even
    # while it is the only one.


app.command("serve")(serve)


def main() -> None:
    """Console-script entry point (``rmqk = "adapter.cli:main"``)."""
    app(prog_name="rmqk")
