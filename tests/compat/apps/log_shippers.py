"""rsyslogd with omkafka and syslog-ng with kafka-c(), each run in the foreground with a configuration, pid file,
work directory and input socket of the test's own (never the system's /dev/log): they read syslog datagrams from a
Unix socket and ship each line as JSON ({"program": ..., "message": ...}) keyed by the program's name to every
destination, one per topic and compression codec (librdkafka's compression.codec, which both pass through).
rsyslogd with imkafka is the other way round: a consumer group member writing each record's value to a file.

rsyslog comes from Debian's rsyslog + rsyslog-kafka; syslog-ng from Debian's syslog-ng-core + syslog-ng-mod-rdkafka
unpacked into a private root ($COMPATBROKER_SYSLOG_NG_DIR, default ~/.cache/compatbroker/syslog-ng), because Debian
lets only one of the two daemons be installed.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from ..clients import MissingClient
from .process import AppProcess

RSYSLOG_HINT = ("apt-get install -y rsyslog rsyslog-kafka  (or: bash tests/run.sh, which runs tests/setup/apps.sh;"
                " no service needs to run)")
SYSLOG_NG_ROOT = Path(os.environ.get("COMPATBROKER_SYSLOG_NG_DIR",
                                     Path.home() / ".cache" / "compatbroker" / "syslog-ng"))
SYSLOG_NG_HINT = (f"bash tests/run.sh (tests/setup/apps.sh unpacks Debian's syslog-ng-core and syslog-ng-mod-rdkafka "
                  f"into {SYSLOG_NG_ROOT}; $COMPATBROKER_SYSLOG_NG_DIR selects another directory)")


@dataclasses.dataclass(frozen=True)
class Destination:
    """One Kafka output of the daemon: its topic and librdkafka compression.codec; `transactional`: syslog-ng's
    sync-send(yes), which makes its producer transactional (transactional.id = the destination's persist name) and
    commits each batch of lines in a transaction of its own."""
    topic: str
    codec: str = "none"
    transactional: bool = False


# --- rsyslog ---------------------------------------------------------------------------------------------------------

def rsyslogd() -> str:
    path = shutil.which("rsyslogd") or ("/usr/sbin/rsyslogd" if Path("/usr/sbin/rsyslogd").exists() else None)
    if path is None or not list(Path("/usr/lib").glob("*/rsyslog/omkafka.so")):  # /usr/lib/<multiarch triplet>/
        raise MissingClient(f"rsyslog with omkafka is not installed: {RSYSLOG_HINT}")
    return path


def rsyslog_version() -> str | None:
    try:
        first = subprocess.run([rsyslogd(), "-v"], capture_output=True, text=True, timeout=10).stdout.split("\n")[0]
    except (MissingClient, OSError, subprocess.SubprocessError):
        return None
    return first.split()[1] if first.startswith("rsyslogd") else first  # "rsyslogd  8.2302.0 (aka 2023.02) ..."


def rsyslog_config(bootstrap: str, socket_path: Path, work_dir: Path, destinations: Sequence[Destination]) -> str:
    """imuxsock on the test's socket only (SysSock.Use off: /dev/log stays untouched), one omkafka action per
    destination: the program name as the key (dynaKey, partitioned by librdkafka) and the codec as a confParam."""
    assert not any(d.transactional for d in destinations), "omkafka has no transactional producer"
    actions = "\n".join(
        f'action(type="omkafka" broker=["{bootstrap}"] topic="{d.topic}" template="json" dynaKey="on" key="program"'
        f' partitions.auto="on" resubmitOnFailure="on" confParam=["compression.codec={d.codec}"]'
        # while Kafka is unreachable omkafka suspends the action: queue the lines and retry for ever, every second
        f' queue.type="LinkedList" action.resumeRetryCount="-1" action.resumeInterval="1")'
        for d in destinations)
    return f"""\
global(workDirectory="{work_dir}")
module(load="imuxsock" SysSock.Use="off")
input(type="imuxsock" Socket="{socket_path}")
module(load="omkafka")
template(name="json" type="list" option.jsonf="on") {{
  property(outname="program" name="programname" format="jsonf")
  property(outname="message" name="msg" format="jsonf")
}}
template(name="program" type="string" string="%programname%")
{actions}
"""


def rsyslog_process(directory: Path, bootstrap: str, destinations: Sequence[Destination]) -> tuple[AppProcess, Path]:
    """(rsyslogd in the foreground, not yet started; the socket it will read) with everything under `directory`."""
    socket_path, work_dir, config = directory / "log.sock", directory / "rsyslog-work", directory / "rsyslog.conf"
    work_dir.mkdir(parents=True, exist_ok=True)
    config.write_text(rsyslog_config(bootstrap, socket_path, work_dir, destinations))
    command = [rsyslogd(), "-n", "-f", str(config), "-i", str(directory / "rsyslog.pid")]
    return AppProcess("rsyslogd", command, directory / "rsyslog.log"), socket_path


def rsyslog_reader(directory: Path, bootstrap: str, topic: str, group: str) -> tuple[AppProcess, Path]:
    """(rsyslogd reading `topic` with imkafka as a member of consumer group `group`, not yet started; the file its
    omfile action writes each record's value to, one a line)."""
    out, work_dir, config = directory / "from-kafka.txt", directory / "rsyslog-work", directory / "rsyslog-in.conf"
    work_dir.mkdir(parents=True, exist_ok=True)
    # %rawmsg%: the record's value as imkafka got it (%msg% is what rsyslog's syslog parser leaves of it)
    config.write_text(f"""\
global(workDirectory="{work_dir}")
module(load="imkafka")
template(name="value" type="string" string="%rawmsg%\\n")
ruleset(name="to_file") {{ action(type="omfile" file="{out}" template="value") }}
input(type="imkafka" topic="{topic}" broker=["{bootstrap}"] consumergroup="{group}" ruleset="to_file"
      confParam=["auto.offset.reset=earliest"])
""")
    command = [rsyslogd(), "-n", "-f", str(config), "-i", str(directory / "rsyslog-in.pid")]
    return AppProcess("rsyslogd (imkafka)", command, directory / "rsyslog-in.log"), out


# --- syslog-ng -------------------------------------------------------------------------------------------------------

def syslog_ng_binary() -> Path:
    binary = SYSLOG_NG_ROOT / "usr" / "sbin" / "syslog-ng"
    if not binary.exists() or not any(SYSLOG_NG_ROOT.glob("usr/lib/syslog-ng/*/libkafka.so")):
        raise MissingClient(f"syslog-ng with its kafka module is not unpacked in {SYSLOG_NG_ROOT}: {SYSLOG_NG_HINT}")
    return binary


def _syslog_ng_env() -> dict[str, str]:
    return {"LD_LIBRARY_PATH": str(SYSLOG_NG_ROOT / "usr" / "lib" / "syslog-ng")}  # libsyslog-ng-3.*.so


def syslog_ng_version() -> str | None:
    try:
        out = subprocess.run([syslog_ng_binary(), "--version"], capture_output=True, text=True, timeout=10,
                             env=os.environ | _syslog_ng_env()).stdout
    except (MissingClient, OSError, subprocess.SubprocessError):
        return None
    # "syslog-ng 3 (3.38.1)" ... "Revision: 3.38.1-5+deb12u1"
    revisions = [line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Revision:")]
    return revisions[0] if revisions else (out.splitlines() or [None])[0]


def syslog_ng_config(bootstrap: str, socket_path: Path, destinations: Sequence[Destination]) -> str:
    """A unix-dgram source on the test's socket and one kafka-c() destination per topic: the program name as the
    key (partitioned with murmur2, kafka-c()'s default topic.partitioner, as Kafka's Java client does), the codec
    through config(), the same JSON as rsyslog's (format-json)."""
    blocks = "\n".join(
        f'destination d{i} {{ kafka-c(bootstrap-servers("{bootstrap}") topic("{d.topic}") key("$PROGRAM")'
        f' message("$(format-json program=$PROGRAM message=$MSG)") config("compression.codec" => "{d.codec}")'
        f' sync-send({"yes" if d.transactional else "no"})); }};\n'
        f'log {{ source(s_test); destination(d{i}); }};'
        for i, d in enumerate(destinations))
    return f"""\
@version: 3.38
options {{ stats-freq(0); }};
source s_test {{ unix-dgram("{socket_path}"); }};
{blocks}
"""


def syslog_ng_process(directory: Path, bootstrap: str,
                      destinations: Sequence[Destination]) -> tuple[AppProcess, Path]:
    """(syslog-ng in the foreground, not yet started; the socket it will read): its own config, persist file, pid
    file and control socket under `directory`, its modules from the private root."""
    binary = syslog_ng_binary()
    socket_path, config = directory / "log.sock", directory / "syslog-ng.conf"
    config.write_text(syslog_ng_config(bootstrap, socket_path, destinations))
    modules = next(SYSLOG_NG_ROOT.glob("usr/lib/syslog-ng/*/libkafka.so")).parent
    command = [str(binary), "-F", "-e", "--no-caps", f"--module-path={modules}", f"--cfgfile={config}",
               f"--persist-file={directory / 'syslog-ng.persist'}", f"--pidfile={directory / 'syslog-ng.pid'}",
               f"--control={directory / 'syslog-ng.ctl'}"]
    return AppProcess("syslog-ng", command, directory / "syslog-ng.log", env=_syslog_ng_env()), socket_path
