"""Repository-wide pytest hooks: the compatibility matrix report, which covers tests/compat/ and spark_tests/ (the
Java client's column) in one run; see tests/compat/matrix.py."""
from tests.compat.matrix_report import *  # noqa: F401,F403
