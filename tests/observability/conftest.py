import pytest

# The checks shared by the eoslog and the Apache Kafka console tests live in console_harness:
# pytest's assertion messages there too.
pytest.register_assert_rewrite("console_harness")
