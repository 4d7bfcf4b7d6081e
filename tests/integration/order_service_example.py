"""An order service: each order is a row in SQLite and an ``order-created`` event, both or neither."""

from __future__ import annotations

import json
import sqlite3
import sys
from contextlib import closing

from rmqkafka.client import (
    LocalTransactionState,
    TransactionListener,
    TransactionMessage,
    TransactionProducer,
)

SCHEMA = "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, item TEXT NOT NULL, quantity INTEGER CHECK (quantity > 0))"


class OrderListener(TransactionListener):
    def __init__(self, db_path: str) -> None:
        self.db_path = db_path  # one connection per call: checks run in the producer's check thread
        with closing(sqlite3.connect(db_path)) as db, db:
            db.execute(SCHEMA)

    def execute_local_transaction(self, message: TransactionMessage, order: dict) -> LocalTransactionState:
        try:
            with closing(sqlite3.connect(self.db_path)) as db, db:  # commits, or rolls back on an error
                db.execute("INSERT INTO orders (id, item, quantity) VALUES (?, ?, ?)",
                           (order["id"], order["item"], order["quantity"]))
        except sqlite3.IntegrityError:  # a duplicate id, a quantity <= 0: no order, no event
            return LocalTransactionState.ROLLBACK_MESSAGE
        return LocalTransactionState.COMMIT_MESSAGE

    def check_local_transaction(self, message: TransactionMessage) -> LocalTransactionState:
        # The broker asks about an event whose transaction outcome it never heard of (this
        # process, or another member of the group, died in between): the row decides.
        order_id = json.loads(message.value)["id"]
        with closing(sqlite3.connect(self.db_path)) as db:
            found = db.execute("SELECT 1 FROM orders WHERE id = ?", (order_id,)).fetchone()
        return LocalTransactionState.COMMIT_MESSAGE if found else LocalTransactionState.ROLLBACK_MESSAGE


def create_orders(bootstrap_servers: str, db_path: str, orders: list[dict]) -> list[str]:
    """Create each order (row + event); returns what became of each event."""
    outcomes = []
    with TransactionProducer(bootstrap_servers, "order-service", OrderListener(db_path)) as producer:
        for order in orders:
            result = producer.send_message_in_transaction(
                "order-created", json.dumps(order).encode(), key=order["id"],
                headers={"source": "order-service"}, arg=order)
            print(f"order {order['id']}: {result.outcome.value} (UNIQ_KEY {result.uniq_key})")
            outcomes.append(result.outcome.value)
    return outcomes


if __name__ == "__main__":
    create_orders(sys.argv[1] if len(sys.argv) > 1 else "localhost:9092", "orders.db", [
        {"id": "o-1", "item": "book", "quantity": 2},
        {"id": "o-2", "item": "pen", "quantity": 0},   # refused by the CHECK constraint: rolled back
        {"id": "o-1", "item": "book", "quantity": 2},  # a duplicate id: rolled back
    ])
