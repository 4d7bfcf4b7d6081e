"""MkDocs hook: fills the reference pages' generated tables (rmqkafka.docs_gen) at build time."""

from rmqkafka.docs_gen import expand


def on_page_markdown(markdown, page, config, files):  # noqa: ARG001 - MkDocs' hook signature
    return expand(markdown)
