#!/usr/bin/env bash
# Build the Go side of `make bench-go` (tests/bench/bench_nri_go.py): a runtime harness on the real
# NRI runtime library (github.com/containerd/nri pkg/adaptation) and a Go plugin on nri's pkg/stub.
#
# Everything is fetched from Debian by exact path into build/go-nri/ (~2.5 GB); nothing is installed
# system-wide (curl only, with apt-get, when it is missing):
#   * Go from Debian trixie (golang-1.24-go + golang-1.24-src, unpacked with dpkg-deb -x; a static
#     toolchain that runs on bookworm). bookworm-backports stops at Go 1.23, and forky's
#     golang.org/x/net (pulled in by ttrpc -> grpc) needs Go 1.24's net/http
#     (GO_NRI_GO_SUITE=bookworm-backports GO_NRI_GO=1.23 still works with GO_NRI_SUITE=trixie);
#   * the NRI library and its dependencies as Debian golang-*-dev packages. Debian's containerd
#     source package (trixie: 1.7.24~ds1) has no vendor/ tree (the "~ds1" repack strips it); Debian
#     ships each Go module as a -dev package under /usr/share/gocode/src instead. The Depends closure
#     of golang-github-containerd-nri-dev from suite $GO_NRI_SUITE is unpacked (one tree per suite)
#     and the two programs are built in GOPATH mode (GO111MODULE=off), as Debian builds its own Go
#     packages. Default suite forky (testing): nri 0.8.0 + ttrpc 1.2.7, what containerd 1.7.26+ and
#     2.0/2.1 vendor, whose runtime splits a Synchronize under ttrpc's 4 MiB (nri >= 0.7). trixie's
#     nri 0.6.1 (what containerd 1.7.16-1.7.25, trixie's 1.7.24 included, vendor) cannot: it refuses to
#     send a Synchronize over 4 MiB (~800 of the bench's pods); GO_NRI_SUITE=trixie builds, and the
#     larger sync rows then show the runtime's error for both plugins.
# Idempotent: downloads and unpacking are skipped when present; the two programs are rebuilt every
# time (seconds, from Go's build cache). Exit status 3 = the network or a download failed (the bench then skips).
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
OUT="${GO_NRI_BUILD:-$ROOT/build/go-nri}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
GOVER="${GO_NRI_GO:-1.24}"
GOSUITE="${GO_NRI_GO_SUITE:-trixie}"
SUITE="${GO_NRI_SUITE:-forky}"
PY="${PYTHON:-$(command -v python3)}"
case "$PY" in /*) ;; */*) PY="$PWD/$PY" ;; esac  # a relative path, before the cd below
BIN="$OUT/bin-$SUITE-go$GOVER"
for tool in curl dpkg-deb; do  # a fresh bookworm may lack curl
    command -v "$tool" >/dev/null && continue
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get install -y -q curl ca-certificates >/dev/null || { apt-get update -q && apt-get install -y -q curl ca-certificates; } \
            || { echo "build.sh: cannot install curl" >&2; exit 3; }
    else
        echo "build.sh: needs $tool (apt-get install curl)" >&2; exit 3
    fi
done
mkdir -p "$OUT/debs" "$OUT/ours/src" "$BIN"
cd "$OUT"

fetch() {  # fetch URL FILE: download once, atomically
    [ -s "$2" ] && return 0
    curl -fsS --retry 2 -m 300 -o "$2.part" "$1" || { echo "build.sh: cannot fetch $1" >&2; exit 3; }
    mv "$2.part" "$2"
}

fetch "$MIRROR/dists/$SUITE/main/binary-all/Packages.xz" "$SUITE-all-Packages.xz"
ARCH="$(dpkg --print-architecture)"
fetch "$MIRROR/dists/$GOSUITE/main/binary-$ARCH/Packages.xz" "$GOSUITE-$ARCH-Packages.xz"
fetch "$MIRROR/dists/$GOSUITE/main/binary-all/Packages.xz" "$GOSUITE-all-Packages.xz"

# Resolve file names: Go from backports, the nri -dev closure from trixie (golang-*-dev only).
"$PY" - "$GOVER" "$SUITE" "$GOSUITE" "$ARCH" > "debs-$SUITE.list" <<'PYEOF'
import lzma, re, sys
def index(path):
    pk, prov = {}, {}
    for block in lzma.open(path, "rt").read().split("\n\n"):
        d = dict(m.groups() for m in re.finditer(r"^([A-Za-z-]+): (.*)$", block, re.M))
        if "Package" in d:
            pk[d["Package"]] = d
            for p in d.get("Provides", "").split(","):
                if p.strip():
                    prov.setdefault(p.strip().split(" ")[0], d["Package"])
    return pk, prov
gover, suite, gosuite, arch = sys.argv[1:5]
gopk = {**index(f"{gosuite}-all-Packages.xz")[0], **index(f"{gosuite}-{arch}-Packages.xz")[0]}
for name in (f"golang-{gover}-go", f"golang-{gover}-src"):
    print("go", gopk[name]["Filename"])
pk, prov = index(f"{suite}-all-Packages.xz")
seen, todo = set(), ["golang-github-containerd-nri-dev"]
while todo:
    n = todo.pop()
    n = n if n in pk else prov.get(n, n)
    if n in seen or n not in pk:
        continue
    seen.add(n)
    for dep in pk[n].get("Depends", "").split(","):
        alt = dep.split("|")[0].strip().split(" ")[0]
        if alt.startswith("golang-") and alt.endswith("-dev"):
            todo.append(alt)
for n in sorted(seen):
    print("lib", pk[n]["Filename"])
PYEOF

while read -r kind path; do
    deb="debs/$(basename "$path")"
    fetch "$MIRROR/$path" "$deb"
    if [ "$kind" = go ]; then dest="goroot-$GOVER"; else dest="libroot-$SUITE"; fi
    stamp="$dest/.$(basename "$deb")"
    [ -e "$stamp" ] && continue
    mkdir -p "$dest"
    dpkg-deb -x "$deb" "$dest"
    touch "$stamp"
done < "debs-$SUITE.list"

GOROOT="$OUT/goroot-$GOVER/usr/lib/go-$GOVER"
export GOROOT PATH="$GOROOT/bin:$PATH"
# GOPATH: our two programs first, then the -dev packages' sources (nothing copied).
rm -rf "$OUT/ours/src/hookserver-nri-bench"
for prog in harness plugin; do
    mkdir -p "$OUT/ours/src/hookserver-nri-bench/$prog"
    cp "$HERE/$prog"/*.go "$OUT/ours/src/hookserver-nri-bench/$prog/"
done
export GOPATH="$OUT/ours:$OUT/libroot-$SUITE/usr/share/gocode" GO111MODULE=off GOFLAGS= CGO_ENABLED=0 GOCACHE="$OUT/gocache-$SUITE-go$GOVER" GOTOOLCHAIN=local
for prog in harness plugin; do
    go build -trimpath -o "$BIN/nri-$prog" "hookserver-nri-bench/$prog"
done
{
    echo "go: $(go version)"
    echo "suite: $SUITE"
    for name in golang-github-containerd-nri-dev golang-github-containerd-ttrpc-dev golang-google-protobuf-dev; do
        f="debs/$(basename "$(grep "/${name}_" "debs-$SUITE.list" | cut -d' ' -f2)")"
        echo "$(dpkg-deb -f "$f" Package): $(dpkg-deb -f "$f" Version)"
    done
} > "$BIN/versions.txt"
# bench_nri_go.py runs what build/go-nri/bin points at.
ln -sfn "$(basename "$BIN")" "$OUT/bin"
cat "$BIN/versions.txt"
