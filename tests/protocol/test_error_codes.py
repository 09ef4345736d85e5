"""Checks compatbroker's error code table against Kafka's numbering and kafka-python's own table."""

import inspect

import kafka.errors
import pytest

from compatbroker.protocol.error_codes import ErrorCode

# kafka-python spells a few codes differently from Kafka's Errors enum (older or client-side names).
# Listed so that any other disagreement fails; the test below also fails if one of these goes stale.
KAFKA_PYTHON_SPELLINGS = {
    -1: "UNKNOWN",
    0: "NO_ERROR",
    6: "NOT_LEADER_FOR_PARTITION",
    10: "MESSAGE_SIZE_TOO_LARGE",
    17: "INVALID_TOPIC",
    39: "INVALID_REPLICATION_ASSIGNMENT",
}

# Codes whose retriable flag kafka-python sets differently from Kafka's exception hierarchy.
KAFKA_PYTHON_RETRIABLE_DIFFERS = {ErrorCode.CORRUPT_MESSAGE}


def kafka_python_errors():
    """kafka-python's broker error classes that carry a wire code."""
    return [
        cls for _, cls in inspect.getmembers(kafka.errors, inspect.isclass)
        if issubclass(cls, kafka.errors.BrokerResponseError) and isinstance(cls.errno, int)
    ]


def test_codes_are_unique():
    values = [code.value for code in ErrorCode]
    assert len(values) == len(set(values))


def test_codes_are_contiguous_from_minus_one_to_the_highest():
    values = sorted(code.value for code in ErrorCode)
    assert values == list(range(-1, values[-1] + 1))


def test_highest_code_is_the_last_one_kafka_4_3_defines():
    assert max(ErrorCode) is ErrorCode.SHARE_SESSION_LIMIT_REACHED
    assert ErrorCode.SHARE_SESSION_LIMIT_REACHED == 133


def test_every_code_has_a_flag_and_a_message():
    for code in ErrorCode:
        assert isinstance(code.retriable, bool), code
        assert code.message.strip(), code


@pytest.mark.parametrize("code, retriable", [
    (ErrorCode.NONE, False),
    (ErrorCode.UNKNOWN_SERVER_ERROR, False),
    (ErrorCode.CORRUPT_MESSAGE, True),
    (ErrorCode.NOT_LEADER_OR_FOLLOWER, True),
    (ErrorCode.NOT_COORDINATOR, True),
    (ErrorCode.REBALANCE_IN_PROGRESS, False),
    (ErrorCode.PRODUCER_FENCED, False),
    (ErrorCode.SHARE_SESSION_LIMIT_REACHED, True),
])
def test_retriable_flags_follow_kafka(code, retriable):
    assert code.retriable is retriable


def test_names_and_numbers_match_kafka_python():
    mismatches = []
    for cls in kafka_python_errors():
        if cls.errno not in {code.value for code in ErrorCode}:
            mismatches.append(f"kafka-python has code {cls.errno} ({cls.message}) that the table lacks")
            continue
        expected = KAFKA_PYTHON_SPELLINGS.get(cls.errno, ErrorCode(cls.errno).name)
        if cls.message != expected:
            mismatches.append(f"code {cls.errno}: kafka-python {cls.message!r}, expected {expected!r}")
    assert not mismatches, "\n".join(mismatches)


def test_spelling_exceptions_are_still_needed():
    spelled = {cls.errno: cls.message for cls in kafka_python_errors()}
    for errno, spelling in KAFKA_PYTHON_SPELLINGS.items():
        assert spelled.get(errno) == spelling
        assert ErrorCode(errno).name != spelling


def test_retriable_flags_match_kafka_python_where_it_follows_kafka():
    mismatches = [
        cls.errno for cls in kafka_python_errors()
        if ErrorCode(cls.errno) not in KAFKA_PYTHON_RETRIABLE_DIFFERS
        and ErrorCode(cls.errno).retriable != cls.retriable
    ]
    assert not mismatches
    for code in KAFKA_PYTHON_RETRIABLE_DIFFERS:
        flags = {cls.retriable for cls in kafka_python_errors() if cls.errno == code}
        assert flags == {not code.retriable}


def test_unknown_wire_values_read_as_unknown_server_error():
    assert ErrorCode.for_code(9999) is ErrorCode.UNKNOWN_SERVER_ERROR
    assert ErrorCode.for_code(16) is ErrorCode.NOT_COORDINATOR
