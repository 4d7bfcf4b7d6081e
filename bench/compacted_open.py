"""Opening a compacted file (storage.compaction_store): what a broker's start pays per
compacted partition, by the number of batches in its cleaned file.

Usage:  python -m bench.compacted_open [--batches N] [--value-bytes B] [--runs R] [--format 1|2]

Writes one compacted file of ``--batches`` one-record batches (a key of 16 bytes, a value of
``--value-bytes``) with the store's own CompactedWriter, then times ``CompactedLog.open`` on
it ``--runs`` times (the file in the page cache: the CPU cost, which is what grew with the
number of batches), and reports the best and the median, with the file's size.
``--format 1`` rewrites the file as the previous format (no footer: open walks and checks
every batch), for the figure before the footer.

Prints a table and one JSON line (``{"bench": "compacted_open", ...}``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import struct
import tempfile
import time
from pathlib import Path

from rmqkafka.storage.compaction_store import CompactedLog, CompactedWriter, encode_header

from .text_table import Table

TABLE = Table.of(("format", "6d", "format"), ("batches", "11,d", "batches"), ("file MB", "8.1f", "file_mb"),
                 ("write s", "8.2f", "write_s"), ("open best s", "12.3f", "open_best_s"),
                 ("open median s", "14.3f", "open_median_s"))


def one_record_batch(key: bytes, value: bytes) -> bytes:
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    builder.append(0, timestamp=1_700_000_000_000, key=key, value=value, headers=[])
    return bytes(builder.build())


def write_file(directory: Path, batches: int, value_bytes: int, file_format: int) -> Path:
    template = bytearray(one_record_batch(b"k" * 16, b"v" * value_bytes))
    writer = CompactedWriter(directory, batches, [])
    for offset in range(batches):
        struct.pack_into(">q", template, 0, offset)  # the base offset is outside the batch CRC
        writer.add(bytes(template))
    writer.finish()
    writer.commit()
    if file_format == 1:  # the same header as version 1, the batches, no footer
        raw = writer.final.read_bytes()
        header = encode_header(batches, [], version=1)
        writer.final.write_bytes(header + raw[len(header):writer.index.end_position])
    return writer.final


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=1_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--format", type=int, choices=(1, 2), default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="compacted-open-") as tmp:
        directory = Path(tmp) / "compaction" / "t-0"
        started = time.perf_counter()
        path = write_file(directory, args.batches, args.value_bytes, args.format)
        written = time.perf_counter() - started
        size = path.stat().st_size
        times = []
        for _ in range(args.runs):
            started = time.perf_counter()
            opened = CompactedLog.open(directory)
            times.append(time.perf_counter() - started)
            assert opened is not None and opened.batch_count == args.batches, "the file did not open"
            opened.close()
    result = {"bench": "compacted_open", "format": args.format, "batches": args.batches, "file_mb": round(size / 1e6, 1),
              "write_s": round(written, 2), "open_best_s": round(min(times), 3),
              "open_median_s": round(statistics.median(times), 3)}
    TABLE.print([result])
    print(json.dumps(result))


if __name__ == "__main__":
    main()
