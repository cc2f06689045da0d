import pytest

# The checks shared by the eoslog and the Apache Kafka console tests live in
# support/console_harness.py: pytest's assertion messages there too.
pytest.register_assert_rewrite("support.console_harness")
