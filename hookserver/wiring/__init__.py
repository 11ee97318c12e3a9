"""How the daemon builds each subsystem, one module per job, so `hookserver/daemon.py` reads as the order
things are built, started and stopped in, and each subsystem's choices (which sink, which backend, which
gate) are in one small function that a test can call.

    gates.py       feature gates: every reconciler's and hook's, koordlet's catalog, the startup log line
    qos.py         the QoS runner: knob owners, snapshot builder, system-file executor, eviction backend
    publishers.py  what the agent publishes: the predictor's NodeMetric, batch capacity, the NRT report
    views.py       the debug server's providers and `hookctl status`'s sections
    runtime.py     the hot path's process tuning (GIL switch interval, heap reserve, hot gate, GC pacer)
    hooks.py       what the hook plugins are told about the node at start (the kernel's CPU-priority files)
    systemd.py     the systemd driver's unit-property keeper (attached to the executor) and its status section

Only the daemon imports this room; it imports the areas, the front doors' settings and the config.
"""
