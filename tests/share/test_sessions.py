"""Share sessions (compatbroker.share.sessions): opening, epochs, the session limit."""
from __future__ import annotations

import pytest

from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.share.sessions import INT32_MAX, ShareSessionCache, ShareSessionError, next_epoch


def test_epochs_start_at_one_and_wrap_to_one():
    assert next_epoch(0) == 1 and next_epoch(41) == 42 and next_epoch(INT32_MAX) == 1 and next_epoch(-1) == -1


def test_open_update_and_errors():
    cache = ShareSessionCache(max_sessions=2)
    session = cache.open("g", "m", [("t", 0)], connection=None)
    assert session.epoch == 1 and session.partitions == {("t", 0): True}
    with pytest.raises(ShareSessionError) as wrong:
        cache.existing("g", "m", 2)
    assert wrong.value.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    with pytest.raises(ShareSessionError) as missing:
        cache.existing("g", "other", 1)
    assert missing.value.error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert cache.existing("g", "m", -1) is session  # closing needs only the session
    session.update([("t", 1)], [("t", 0)])
    assert session.partitions == {("t", 1): True}


def test_the_limit_counts_other_members_not_the_session_being_replaced():
    cache = ShareSessionCache(max_sessions=1)
    first = cache.open("g", "m", [], connection=None)
    replaced = cache.open("g", "m", [], connection=None)
    assert replaced is not first and cache.get("g", "m") is replaced
    assert not cache.remove_session(first)
    with pytest.raises(ShareSessionError) as limit:
        cache.open("g", "m2", [], connection=None)
    assert limit.value.error_code == ErrorCode.SHARE_SESSION_LIMIT_REACHED
