# sshcluster.py DIR N - Dask's own SSHCluster on the first N test hosts of DIR (tests/support/
# testhosts): scheduler on lab0, one worker on each of lab0..lab(N-1), asyncssh as root with the
# hosts' key; prints "SECONDS REGISTERED": from SSHCluster(...) until a client's
# wait_for_workers(N) returned, and when the scheduler registered the N-th worker (its own
# "add-worker" event; "-" when it has none), both after the imports. Used by
# tests/bench/cluster_start_dask.sh and tests/bench/scale.sh.
import sys, time, logging, warnings
warnings.simplefilter("ignore")
logging.disable(logging.WARNING)
import distributed, asyncssh  # noqa: F401 (imported before the clock starts)
from distributed.deploy.ssh import SSHCluster
d, n = sys.argv[1], int(sys.argv[2])
addrs = [line.split()[1] for line in open(d + "/hosts.txt")][:n]
opts = {"known_hosts": d + "/known_hosts", "client_keys": [d + "/id_ed25519"],
        "username": "root", "agent_path": None}
t0, w0 = time.monotonic(), time.time()
cluster = SSHCluster([addrs[0]] + addrs, connect_options=opts,
                     scheduler_options={"host": addrs[0], "port": 0, "dashboard": False},
                     worker_options={"nthreads": 1, "memory_limit": 0, "dashboard": False})
client = distributed.Client(cluster)
client.wait_for_workers(n)
t1 = time.monotonic()
ts = sorted(t for t, m in client.get_events("all")
            if isinstance(m, dict) and m.get("action") == "add-worker")
print("%.2f %s" % (t1 - t0, "%.2f" % (ts[n - 1] - w0) if len(ts) >= n else "-"), flush=True)
client.close()
cluster.close()
