"""The ``rmqk`` command line: one click group that gathers the sub-commands.

This module only assembles the group; each command lives in its own module of this package:
``serve``, and the Kafka-client commands ``topics``, ``configs``, ``produce``, ``consume``, ``groups``,
``views``, ``delays``, ``dlq``, ``transactions`` and ``docs`` (all registered lazily, see ``_Lazy``; the client commands' conventions are in ``common``). The command line is a
Kafka admin client and the broker's launcher, not protocol code, hence a package of its own. Plain click rather than typer: typer now imports pydantic,
which alone would add ~0.1 s to every broker start, and start-up time is a feature here.
The broker itself is imported only when ``serve`` actually starts it, so ``rmqk --help`` and
configuration errors are fast; ``serve`` is lazy too (its module imports asyncio and the
broker's configuration, ~55 ms), so ``rmqk --version`` and the client commands never load it.

Output conventions shared by all commands: stdout carries only results meant for scripts
(for ``serve``, exactly the line ``rmqk broker started on HOST:PORT``); logs and errors go
to stderr; an error the user can fix prints one line ``rmqk: error: ...`` and exits 2.
"""

from __future__ import annotations

import importlib

import click


def _print_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    """``rmqk --version``: the installed distribution's version (importlib.metadata), else
    the package's own ``__version__`` (a source tree that was never installed)."""
    if not value or ctx.resilient_parsing:
        return
    from importlib.metadata import PackageNotFoundError, version

    try:
        text = version("rmqkafka")
    except PackageNotFoundError:
        from rmqkafka import __version__ as text
    click.echo(f"rmqk {text}")
    ctx.exit()


@click.group(
    name="rmqk",
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
)
@click.option(
    "-V", "--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
    help="Print the version and exit.",
)
def main() -> None:
    """rmqkafka: a Kafka-protocol broker with Apache RocketMQ message semantics."""


class _Lazy(click.Command):
    """A sub-command whose module is imported only when it runs (or shows its help).

    The client commands are large modules; importing them eagerly would add ~25 ms to every
    ``rmqk serve`` start. Group.invoke runs ``sub_ctx.command``, i.e. the real command.
    """

    def __init__(self, name: str, target: str, short_help: str) -> None:
        super().__init__(name, short_help=short_help)
        self._target = target

    def real(self) -> click.Command:
        module, _, attr = self._target.partition(":")
        return getattr(importlib.import_module(module), attr)

    def make_context(self, info_name, args, parent=None, **extra):  # type: ignore[no-untyped-def]
        return self.real().make_context(info_name, args, parent=parent, **extra)


main.add_command(_Lazy("serve", "rmqkafka.cli.serve:serve", "Run the broker in the foreground until SIGTERM or SIGINT."))
main.add_command(_Lazy("topics", "rmqkafka.cli.topics:topics", "Create, list, describe, alter and delete topics."))
main.add_command(_Lazy("produce", "rmqkafka.cli.produce:produce", "Send lines of stdin (or a file) as records."))
main.add_command(_Lazy("consume", "rmqkafka.cli.consume:consume", "Print records of a topic."))
main.add_command(_Lazy("groups", "rmqkafka.cli.groups:groups", "List, describe, reset offsets of and delete consumer groups."))
main.add_command(_Lazy("configs", "rmqkafka.cli.configs:configs", "Describe and change broker configs at run time."))
main.add_command(_Lazy("views", "rmqkafka.cli.views:views", "Create, list, describe and delete subscription views."))
main.add_command(_Lazy("delays", "rmqkafka.cli.delays:delays", "Show delay levels and pending timers of the broker's scheduler."))
main.add_command(_Lazy("dlq", "rmqkafka.cli.dlq:dlq", "List and re-send a consumer group's dead letters."))
main.add_command(_Lazy("docs", "rmqkafka.cli.docs:docs", "Build the documentation site if needed (offline) and print or serve it."))
main.add_command(_Lazy("transactions", "rmqkafka.cli.transactions:transactions", "Kafka transactions (list, describe, find hanging ones) and RocketMQ half messages."))
