#!/usr/bin/env bash
# `make e2e`: the real-apiserver and real-cluster tiers (tests/kube, marker kube_e2e), then the containerd
# tier (tests/containerd, marker containerd_e2e: containerd 1.7 with NRI and real runc containers).
#
# With HOOKSERVER_E2E_KUBECONFIG set, the tests run against that apiserver (and its node and scheduler, when
# they are up) and nothing is started or stopped. Without it, the kube-e2e harness beside the repository
# (HOOKSERVER_E2E_TOOLS, default ../shared/tools/kube-e2e; needs root) is built where missing and started: a
# kube-apiserver with etcd, a one-node cluster (kubelet 1.20, containerd 1.6) and a kube-scheduler. What this
# script started, it stops at the end; a harness that was already up is left as it was. Without the harness
# (or root), every test is skipped and says why.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
TOOLS=${HOOKSERVER_E2E_TOOLS:-../shared/tools/kube-e2e}
KUBE_E2E=${KUBE_E2E:-/tmp/kube-e2e}

alive() { [[ -s $KUBE_E2E/run/$1.pid ]] && kill -0 "$(<"$KUBE_E2E/run/$1.pid")" 2>/dev/null; }

if [[ -z ${HOOKSERVER_E2E_KUBECONFIG:-} ]]; then
  if [[ -x $TOOLS/build.sh && $(id -u) == 0 ]]; then
    echo "make e2e: HOOKSERVER_E2E_KUBECONFIG is not set: building and starting the kube-e2e harness ($TOOLS)"
    already=""
    alive kube-apiserver && already+=" apiserver"
    alive kubelet && already+=" kubelet"
    alive kube-scheduler && already+=" scheduler"
    "$TOOLS/build.sh" && "$TOOLS/build-kubelet.sh" && "$TOOLS/build-scheduler.sh"
    # the DaemonSet test's controller-manager (daemonset, garbagecollector, namespace controllers)
    KUBE_E2E_TOOLS=$TOOLS tests/kube/build-controller-manager.sh
    if [[ -z $already ]]; then
      trap 'echo "make e2e: stopping the harness it started"; "$TOOLS/stop-scheduler.sh" || true; ALL=1 "$TOOLS/stop-node.sh" || true' EXIT
    else
      echo "make e2e: already running:$already (left running afterwards)"
    fi
    "$TOOLS/start-node.sh"
    "$TOOLS/start-scheduler.sh"
    export HOOKSERVER_E2E_KUBECONFIG=$KUBE_E2E/kubeconfig
  else
    echo "make e2e: HOOKSERVER_E2E_KUBECONFIG is not set and the kube-e2e harness ($TOOLS) is missing or this is"
    echo "          not root: the real-apiserver tests (tests/kube) are SKIPPED. Point HOOKSERVER_E2E_KUBECONFIG at"
    echo "          an admin kubeconfig of a kube-apiserver >= 1.20 to run them."
  fi
fi
rc=0
"$PY" -m pytest -q -p no:cacheprovider -rs -m kube_e2e tests/kube || rc=$?
# The containerd tier (tests/containerd): Debian 13's containerd 1.7 with NRI, fetched through apt once into
# build/containerd-nri/, its own sockets and root; hookserver as its NRI plugin. Needs root.
if [[ $(id -u) == 0 ]]; then
  HOOKSERVER_CONTAINERD_E2E=1 "$PY" -m pytest -q -p no:cacheprovider -rs -m containerd_e2e tests/containerd || rc=$?
else
  echo "make e2e: not root: the containerd tier (tests/containerd) is SKIPPED"
fi
exit $rc
