"""LogConfig: Kafka's defaults, broker-level names with their fallbacks, topic overrides, validation."""
import pytest

from compatbroker.storage.log_config import LONG_MAX, ConfigError, LogConfig, StorageConfig


def test_defaults_are_kafkas():
    config = LogConfig()
    assert (config.segment_bytes, config.segment_ms, config.segment_index_bytes) == (1073741824, 604800000, 10485760)
    assert (config.index_interval_bytes, config.flush_messages, config.flush_ms) == (4096, LONG_MAX, LONG_MAX)
    assert (config.retention_ms, config.retention_bytes, config.cleanup_policy) == (604800000, -1, ("delete",))
    assert (config.delete_retention_ms, config.max_message_bytes) == (86400000, 1048588)
    assert (config.message_timestamp_type, config.min_cleanable_dirty_ratio) == ("CreateTime", 0.5)
    assert config.file_delete_delay_ms == 60000
    assert StorageConfig().log_retention_check_interval_ms == 300000


def test_broker_names_and_their_hour_and_minute_fallbacks():
    config = LogConfig.from_properties({"log.segment.bytes": "1000", "log.roll.hours": "2",
                                        "log.retention.minutes": "3", "log.retention.hours": "99",
                                        "log.flush.interval.messages": "1", "log.index.interval.bytes": "10",
                                        "message.max.bytes": 500, "log.cleanup.policy": "compact,delete",
                                        "unrelated.broker.setting": "x"})
    assert (config.segment_bytes, config.segment_ms, config.retention_ms) == (1000, 7_200_000, 180_000)
    assert (config.flush_messages, config.index_interval_bytes, config.max_message_bytes) == (1, 10, 500)
    assert config.compact and config.delete
    assert LogConfig.from_properties({"log.roll.ms": "5", "log.roll.hours": "2"}).segment_ms == 5
    assert LogConfig.from_properties({"log.flush.scheduler.interval.ms": "7"}).flush_ms == 7


def test_topic_overrides_win_and_round_trip_through_properties():
    config = LogConfig.from_properties({"log.retention.ms": "10"}, {"retention.ms": "20", "preallocate": "true",
                                                                   "message.timestamp.type": "LogAppendTime"})
    assert (config.retention_ms, config.preallocate, config.log_append_time) == (20, True, True)
    properties = config.to_topic_properties()
    assert properties["retention.ms"] == "20" and properties["cleanup.policy"] == "delete"
    assert LogConfig().with_overrides(properties) == config


@pytest.mark.parametrize("overrides", [{"no.such.config": "1"}, {"segment.bytes": "lots"},
                                       {"cleanup.policy": "shred"}, {"message.timestamp.type": "Now"},
                                       {"flush.messages": "0"}, {"retention.ms": "-2"}])
def test_bad_overrides_raise_config_error(overrides):
    with pytest.raises(ConfigError) as info:
        LogConfig.from_properties({}, overrides)
    assert info.value.error_code == 40


# --- every topic config of Kafka's catalogue ----------------------------------------------------------------------

def test_every_catalogued_topic_config_is_accepted_with_its_default():
    from compatbroker.config_catalog import TOPIC_CONFIGS
    defaults = {name: key.default for name, key in TOPIC_CONFIGS.items()}
    assert LogConfig().with_overrides(defaults) == LogConfig()  # the defaults are Kafka's, modeled or not
    assert set(LogConfig().to_topic_properties()) <= set(TOPIC_CONFIGS)


@pytest.mark.parametrize("overrides", [
    {"unclean.leader.election.enable": "true"}, {"compression.gzip.level": "9"}, {"compression.zstd.level": "-5"},
    {"leader.replication.throttled.replicas": "0:1,1:1"}, {"follower.replication.throttled.replicas": "*"},
    {"local.retention.ms": "-2"}, {"remote.log.copy.disable": "TRUE"}, {"remote.storage.enable": "false"}])
def test_configs_storage_does_not_model_are_type_checked_and_accepted(overrides):
    assert LogConfig.from_properties({}, overrides) == LogConfig()  # storage ignores them


@pytest.mark.parametrize("overrides", [
    {"unclean.leader.election.enable": "maybe"}, {"compression.gzip.level": "10"}, {"compression.lz4.level": "0"},
    {"compression.zstd.level": "23"}, {"leader.replication.throttled.replicas": "0-1"},
    {"local.retention.bytes": "-3"}, {"segment.bytes": "3000000000"}, {"max.message.bytes": "1.5"},
    {"compression.type": "brotli"}, {"compression.type": "GZIP"}, {"min.cleanable.dirty.ratio": "1.5"},
    {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, {"remote.storage.enable": "true"},
    {"message.downconversion.enable": "maybe"}, {"message.format.version": "3.10"}, {"no.such.config": "1"}])
def test_values_and_names_kafka_refuses_raise_config_error(overrides):
    with pytest.raises(ConfigError) as info:
        LogConfig().with_overrides(overrides)
    assert info.value.error_code == 40


def test_unmodeled_overrides_are_kept_by_the_manager_across_a_restart(tmp_path):
    from compatbroker.storage.log_manager import LogManager
    manager = LogManager(str(tmp_path))
    manager.startup(0)
    manager.create_topic("t", 1, now_ms=0, overrides={"unclean.leader.election.enable": "true"})
    manager.set_topic_config("t", {"compression.zstd.level": "7", "retention.ms": "99"})
    manager.shutdown()
    again = LogManager(str(tmp_path))
    again.startup(0)
    assert again.topic_overrides["t"] == {"compression.zstd.level": "7", "retention.ms": "99"}
    assert again.get_log("t", 0).config.retention_ms == 99
    again.shutdown()
