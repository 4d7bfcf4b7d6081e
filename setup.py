"""The optional C extension (storage/_batchscan.c); everything else is in pyproject.toml.

``optional=True``: when it does not build (no compiler), installation goes on without it and
the broker uses the pure-Python path (storage.batch_scan says which, and ``rmqk serve`` logs
it).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("rmqkafka.storage._batchscan", ["storage/_batchscan.c"],
                             extra_compile_args=["-O2"], optional=True)])
