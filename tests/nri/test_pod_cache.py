"""The hot path's pod translation memo: a hit is always the same pod, a changed pod is a miss, and it is bounded."""

from __future__ import annotations

from hookserver.nri.translate import PodRequestCache, pod_request
from tests.nri.conftest import be_pod


def test_equal_pods_hit_changed_pods_miss_and_the_cache_is_bounded() -> None:
    cache = PodRequestCache(max_entries=2)
    first = cache.get(be_pod())
    assert cache.get(be_pod()) is first and cache.hits == 1  # same content: the same frozen request
    changed = be_pod()
    changed.annotations["node.koordinator.sh/extended-resource-spec"] = '{"containers": {}}'
    other = cache.get(changed)
    assert other is not first and other == pod_request(changed) and cache.misses == 2
    relabelled = be_pod()
    relabelled.labels["koordinator.sh/qosClass"] = "LS"
    assert cache.get(relabelled).labels["koordinator.sh/qosClass"] == "LS"
    assert len(cache._entries) == 2  # the oldest went first


def test_map_order_does_not_matter() -> None:
    a, b = be_pod(), be_pod()
    for key, value in (("x", "1"), ("y", "2"), ("z", "3")):
        a.labels[key] = value
    for key, value in (("z", "3"), ("y", "2"), ("x", "1")):
        b.labels[key] = value
    cache = PodRequestCache()
    assert cache.get(a) is cache.get(b)


def test_container_env_is_split_only_when_read_and_reads_like_koordlet() -> None:
    from hookserver.hooks.context import frozen_map
    from hookserver.nri.translate import EnvView, container_request, split_env
    from tests.nri.conftest import container

    pod = be_pod()
    env = ["A=1", "B=", "=x", "C=a=b", "PATH=/bin"]
    view = EnvView(env)
    assert view._map is None  # nothing split yet
    assert dict(view) == {"A": "1", "C": "a=b", "PATH": "/bin"} == split_env(env)
    assert len(view) == 3 and "B" not in view and view["C"] == "a=b"
    request = container_request(PodRequestCache().get(pod), container(pod, "a", "c1", env=env))
    assert request.envs == frozen_map(split_env(env))
    assert container_request(PodRequestCache().get(pod), container(pod, "a", "c1")).envs == {}
