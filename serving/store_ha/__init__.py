"""A replicated control store on one machine: etcd and PostgreSQL nodes under Patroni, on loopback.

    python -m serving store-ha up | down [--purge] | status      (make store-ha / store-ha-down)

`up` installs what is missing (Debian's etcd-server and patroni, when run as root), starts etcd
and the Patroni nodes in a work folder (var/store-ha/), and returns once a primary and its
synchronous standby are streaming, printing the multi-host store URL the platform uses. It is
idempotent: what already runs is left alone. `down` stops every process it started and waits until
their ports are free (`--purge` also deletes the folder). `status` prints the members as Patroni
sees them and exits 0 only while a primary and a synchronous standby are up.

    cluster.py         the layout (ports, URL), starting and stopping etcd and the nodes, members
    patroni_config.py  each node's Patroni configuration, and why each choice
    processes.py       a daemon as a process: alive, signalled, listening; files owned by postgres
"""

from serving.store_ha.cluster import Cluster, ClusterLayout, Member

__all__ = ["Cluster", "ClusterLayout", "Member"]
