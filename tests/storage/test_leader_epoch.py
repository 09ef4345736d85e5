"""The leader epoch cache behind OffsetForLeaderEpoch, persisted in leader-epoch-checkpoint."""
from compatbroker.storage.leader_epoch import LeaderEpochCache

from .helpers import NOW, batch, open_log


def test_epochs_start_where_their_first_batch_was_written_and_survive_restarts(tmp_path):
    log = open_log(tmp_path)
    for epoch in (0, 0, 2, 2, 5):
        log.append(batch([b"a", b"b"]), leader_epoch=epoch, now_ms=NOW)
    assert log.epochs.entries == [(0, 0), (2, 4), (5, 8)]
    assert log.epochs.end_offset_for(0, log.log_end_offset) == (0, 4)
    assert log.epochs.end_offset_for(3, log.log_end_offset) == (2, 8)
    assert log.epochs.end_offset_for(9, log.log_end_offset) == (5, 10)
    log.truncate_to(8)
    log.close()
    assert LeaderEpochCache(log.directory).entries == [(0, 0), (2, 4)]


def test_moving_the_start_offset_trims_old_epochs(tmp_path):
    cache = LeaderEpochCache(str(tmp_path))
    cache.assign(1, 0)
    cache.assign(3, 10)
    cache.assign(4, 20)
    cache.truncate_from_start(15)
    assert cache.entries == [(3, 15), (4, 20)]
    assert cache.end_offset_for(0, 30) == (-1, -1)
