"""gunicorn's settings for the forum: 127.0.0.1 only, and the server's own figures.

The workers record django-prometheus's timings into PROMETHEUS_MULTIPROC_DIR;
the master (idle while the workers serve) answers /metrics on 127.0.0.1:
FORUM_METRICS_PORT with them summed over the workers, and with the CPU seconds
and resident memory of the whole server (the master and its workers) as
process_cpu_seconds_total and process_resident_memory_bytes, and of its MariaDB
as mariadb_cpu_seconds_total and mariadb_resident_memory_bytes: a scrape never
waits behind a request, and the CPU a request costs is the server's, not one
worker's.
"""

import os

bind = "127.0.0.1:" + os.environ["FORUM_PORT"]
workers = int(os.environ.get("FORUM_WORKERS", "2"))
timeout = 120
control_socket_disable = True  # gunicorn 23+ writes a control socket into $HOME otherwise
accesslog = None
errorlog = "-"
loglevel = "warning"

_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _stat(pid):
    """CPU seconds (user and system) and resident bytes of one process, or None when gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICKS, int(fields[21]) * _PAGE


def _children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


class _Processes:
    """The server's and its database's CPU and memory, read from /proc at each scrape."""

    def __init__(self, master, database_pid_file):
        self.master = master
        self.database_pid_file = database_pid_file
        self.gone = 0.0  # the CPU of workers that exited (a restart): the counter never goes back

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        cpu, rss = 0.0, 0
        for pid in [self.master] + _children(self.master):
            s = _stat(pid)
            if s:
                cpu, rss = cpu + s[0], rss + s[1]
        with open(f"/proc/{self.master}/stat") as f:  # cutime, cstime: children reaped
            fields = f.read().rsplit(")", 1)[1].split()
        cpu += (int(fields[13]) + int(fields[14])) / _TICKS
        yield CounterMetricFamily("process_cpu_seconds_total",
                                  "CPU seconds of the forum's gunicorn master and workers", value=cpu)
        yield GaugeMetricFamily("process_resident_memory_bytes",
                                "Resident memory of the forum's gunicorn master and workers", value=rss)
        try:
            with open(self.database_pid_file) as f:
                s = _stat(int(f.read().strip()))
        except (OSError, ValueError):
            s = None
        if s:
            yield CounterMetricFamily("mariadb_cpu_seconds_total", "CPU seconds of the forum's MariaDB", value=s[0])
            yield GaugeMetricFamily("mariadb_resident_memory_bytes", "Resident memory of the forum's MariaDB",
                                    value=s[1])


def when_ready(server):
    from prometheus_client import CollectorRegistry, multiprocess, start_http_server

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    registry.register(_Processes(os.getpid(), os.environ["FORUM_DB_PID_FILE"]))
    start_http_server(int(os.environ["FORUM_METRICS_PORT"]), addr="127.0.0.1", registry=registry)


def child_exit(server, worker):
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)
