"""Child process trees: starting a server and stopping all of it, and what its processes cost
(Linux /proc).

server_process.py   LoopbackServer: a server on a loopback port for a `with` block, its whole
                    process group stopped after; free_port; exit_on_sigterm
shm_leftovers.py    the shared memory in /dev/shm a server's processes left behind, removed
pss.py              PeakPss: the peak memory (PSS) of a process tree while a load runs
proc_cpu.py         tree_cpu: CPU seconds of the platform's process tree, by role and worker thread
"""
