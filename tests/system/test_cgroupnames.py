

def test_kube_qos_of_status_and_runtime_of_one_copy_for_every_area() -> None:
    from hookserver.system.cgroupnames import ContainerRuntime, KubeQoS, kube_qos_of_status, runtime_of

    assert kube_qos_of_status("BestEffort") is KubeQoS.BESTEFFORT
    assert kube_qos_of_status("Best-Effort") is KubeQoS.BESTEFFORT
    assert kube_qos_of_status("Guaranteed") is KubeQoS.GUARANTEED
    assert kube_qos_of_status("") is None and kube_qos_of_status("Premium") is None
    assert runtime_of("docker://abc", ContainerRuntime.CONTAINERD) is ContainerRuntime.DOCKER
    assert runtime_of("crio://abc", ContainerRuntime.CONTAINERD) is ContainerRuntime.CRIO
    assert runtime_of("abc", ContainerRuntime.POUCH) is ContainerRuntime.POUCH
    assert runtime_of("rkt://abc", ContainerRuntime.DOCKER) is ContainerRuntime.DOCKER
