"""Recordings to try the replay on: a synthetic day (`synthetic`) and a real hour on real cgroups (`cgroup_hour`)."""
