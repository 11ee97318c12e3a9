#!/usr/bin/env bash
# build-controller-manager.sh — builds a real kube-controller-manager (v1.20.x) from the same Debian
# `kubernetes` source tree and with the same Go 1.19 / GOPATH settings as
# build.sh (source tree, GOPATH symlink, reflect2 swap, generated openapi);
# runs build.sh first when any of those is missing.
#
# Re-runnable and idempotent: skipped when $KUBE_E2E/bin/kube-controller-manager exists.
#   KUBE_E2E   root of the harness             (default /tmp/kube-e2e)
#   FORCE=1    rebuild even if the binary exists
#   CGO=0|1    force CGO_ENABLED (default: try 0, fall back to 1)
#
# Result: $KUBE_E2E/bin/kube-controller-manager (about 1 min on 2 cores with the warm Go
# cache from build.sh). hookserver's DaemonSet test (tests/kube/test_daemonset_node.py) runs it with only
# the daemonset and garbagecollector controllers: the harness runs no controller-manager, and a DaemonSet
# needs its controller to get pods (and the garbage collector to lose them on uninstall).
set -euo pipefail

KUBE_E2E=${KUBE_E2E:-/tmp/kube-e2e}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The harness (build.sh and friends) lives in ../shared/tools/kube-e2e, next to the repository.
HARNESS=${KUBE_E2E_TOOLS:-$(cd "$HERE/../../.." && pwd)/shared/tools/kube-e2e}
GOROOT_119=/usr/lib/go-1.19
GO=$GOROOT_119/bin/go
SRC_DIR=$KUBE_E2E/src
GOPATH_DIR=$KUBE_E2E/gopath
PKG_ROOT=$GOPATH_DIR/src/k8s.io/kubernetes
BIN_DIR=$KUBE_E2E/bin

log() { printf '[build-controller-manager %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

mkdir -p "$KUBE_E2E" "$BIN_DIR"

if [[ ${FORCE:-0} != 1 && -x $BIN_DIR/kube-controller-manager ]]; then
  "$BIN_DIR/kube-controller-manager" --version
  log "exists: $BIN_DIR/kube-controller-manager (FORCE=1 to rebuild)"
  exit 0
fi

# The source tree, GOPATH symlink, reflect2 swap and generated openapi come
# from build.sh; run it if any of them is missing (it is idempotent too).
TREE=$(find "$SRC_DIR" -mindepth 1 -maxdepth 1 -type d -name 'kubernetes-*' 2>/dev/null | sort | tail -n1 || true)
if [[ -z $TREE || ! -d $TREE/vendor || ! -L $PKG_ROOT || ! -x $GO \
      || ! -s $TREE/pkg/generated/openapi/zz_generated.openapi.go \
      || ! -f $TREE/vendor/github.com/modern-go/reflect2/go_above_118.go ]]; then
  BUILD_SH=$HARNESS/build.sh
  [[ -x $BUILD_SH ]] || BUILD_SH=$KUBE_E2E/build.sh
  [[ -x $BUILD_SH ]] || die "source tree not prepared and no build.sh next to this script or in $KUBE_E2E"
  log "source tree not prepared: running $BUILD_SH"
  KUBE_E2E=$KUBE_E2E "$BUILD_SH"
  TREE=$(find "$SRC_DIR" -mindepth 1 -maxdepth 1 -type d -name 'kubernetes-*' | sort | tail -n1)
fi
DEB_VERSION=$(cd "$TREE" && dpkg-parsechangelog -S Version)
UPSTREAM=${DEB_VERSION%%-*}
UPSTREAM=${UPSTREAM##*really}
UPSTREAM=${UPSTREAM%%+*}
log "source: $TREE (Debian $DEB_VERSION, upstream v$UPSTREAM)"

export GOROOT=$GOROOT_119
export GOPATH=$GOPATH_DIR
export GO111MODULE=off
export GOCACHE=${GOCACHE:-$KUBE_E2E/.cache/go-build}
export PATH=$GOROOT_119/bin:$PATH
unset GOFLAGS GOBIN GOOS GOARCH
cd "$PKG_ROOT"   # through the symlink: go uses $PWD for the import path

MAJOR=${UPSTREAM%%.*}; MINOR=${UPSTREAM#*.}; MINOR=${MINOR%%.*}
LDFLAGS="-s -w"
for p in k8s.io/kubernetes/vendor/k8s.io/component-base/version k8s.io/kubernetes/vendor/k8s.io/client-go/pkg/version; do
  LDFLAGS+=" -X $p.gitVersion=v$UPSTREAM -X $p.gitMajor=$MAJOR -X $p.gitMinor=$MINOR"
  LDFLAGS+=" -X $p.gitTreeState=clean -X $p.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
done

build() {  # build CGO_ENABLED
  log "go build kube-controller-manager (v$UPSTREAM, $("$GO" version | awk '{print $3}'), CGO_ENABLED=$1)"
  CGO_ENABLED=$1 "$GO" build -tags selinux,notest -ldflags "$LDFLAGS" \
    -o "$BIN_DIR/kube-controller-manager.tmp" k8s.io/kubernetes/cmd/kube-controller-manager
}

start=$(date +%s)
if [[ -n ${CGO:-} ]]; then
  build "$CGO"
elif ! build 0; then
  log "CGO_ENABLED=0 build failed; retrying with CGO_ENABLED=1"
  build 1
fi
mv "$BIN_DIR/kube-controller-manager.tmp" "$BIN_DIR/kube-controller-manager"
log "built $BIN_DIR/kube-controller-manager in $(( $(date +%s) - start ))s"
"$BIN_DIR/kube-controller-manager" --version
