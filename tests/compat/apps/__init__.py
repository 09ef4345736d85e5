"""Applications of the compat matrix's "Applications and pipelines" family, run as the programs users run: a
faust-streaming worker (faust_counter.py, in faust's own virtual environment), rsyslogd with omkafka and syslog-ng
with its kafka-c() destination. They have no ClientAdapter: test_faust.py and test_log_shippers.py drive them through
these helpers and read what they produced with the reference client.

Installed by tests/setup/apps.sh (Debian's rsyslog-kafka; syslog-ng's packages unpacked into a private root, since
syslog-ng-core and rsyslog conflict in Debian; faust-streaming in a virtual environment of its own).
"""
