#!/usr/bin/env bash
# Build the Go side of `make bench-go` (tests/bench/bench_nri_go.py): a runtime harness on the real
# NRI runtime library (github.com/containerd/nri pkg/adaptation) and a Go plugin on nri's pkg/stub.
#
# Everything is fetched from Debian by exact path, nothing is installed system-wide and nothing
# outside build/go-nri/ is written:
#   * Go from bookworm-backports (golang-1.23-go + golang-1.23-src, unpacked with dpkg-deb -x);
#   * the NRI library and its dependencies as Debian trixie's golang-*-dev packages (Debian strips
#     containerd's vendor/ tree, "~ds1", and ships each Go module as a -dev package under
#     /usr/share/gocode/src instead); the Depends closure of golang-github-containerd-nri-dev is
#     unpacked into one GOPATH and the two programs are built in GOPATH mode (GO111MODULE=off),
#     as Debian builds its own Go packages.
# Idempotent: downloads and unpacking are skipped when present; the binaries are rebuilt when a
# source file is newer. Exit status 3 = the network or a download failed (the bench then skips).
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
OUT="${GO_NRI_BUILD:-$ROOT/build/go-nri}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
GOVER="${GO_NRI_GO:-1.23}"
PY="${PYTHON:-$(command -v python3)}"
mkdir -p "$OUT/debs" "$OUT/gopath/src" "$OUT/bin"
cd "$OUT"

fetch() {  # fetch URL FILE: download once, atomically
    [ -s "$2" ] && return 0
    curl -fsS --retry 2 -m 300 -o "$2.part" "$1" || { echo "build.sh: cannot fetch $1" >&2; exit 3; }
    mv "$2.part" "$2"
}

fetch "$MIRROR/dists/trixie/main/binary-all/Packages.xz" trixie-all-Packages.xz
fetch "$MIRROR/dists/bookworm-backports/main/binary-amd64/Packages.xz" bpo-amd64-Packages.xz
fetch "$MIRROR/dists/bookworm-backports/main/binary-all/Packages.xz" bpo-all-Packages.xz

# Resolve file names: Go from backports, the nri -dev closure from trixie (golang-*-dev only).
"$PY" - "$GOVER" > debs.list <<'PYEOF'
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
gover = sys.argv[1]
bpo = {**index("bpo-all-Packages.xz")[0], **index("bpo-amd64-Packages.xz")[0]}
for name in (f"golang-{gover}-go", f"golang-{gover}-src"):
    print("go", bpo[name]["Filename"])
pk, prov = index("trixie-all-Packages.xz")
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
    stamp="$deb.unpacked"
    [ -e "$stamp" ] && continue
    if [ "$kind" = go ]; then dpkg-deb -x "$deb" goroot; else dpkg-deb -x "$deb" libroot; fi
    touch "$stamp"
done < debs.list

GOROOT="$OUT/goroot/usr/lib/go-$GOVER"
export GOROOT PATH="$GOROOT/bin:$PATH"
# One GOPATH: the -dev packages' sources, plus our two programs.
if [ ! -e "$OUT/gopath/.libs" ]; then
    cp -a "$OUT/libroot/usr/share/gocode/src/." "$OUT/gopath/src/"
    touch "$OUT/gopath/.libs"
fi
rm -rf "$OUT/gopath/src/hookserver-nri-bench"
for prog in harness plugin; do
    mkdir -p "$OUT/gopath/src/hookserver-nri-bench/$prog"
    cp "$HERE/$prog"/*.go "$OUT/gopath/src/hookserver-nri-bench/$prog/"
done
export GOPATH="$OUT/gopath" GO111MODULE=off GOFLAGS= CGO_ENABLED=0 GOCACHE="$OUT/gocache" GOTOOLCHAIN=local
for prog in harness plugin; do
    go build -trimpath -o "$OUT/bin/nri-$prog" "hookserver-nri-bench/$prog"
done
{
    echo "go: $(go version)"
    for f in debs/golang-github-containerd-nri-dev_*.deb debs/golang-github-containerd-ttrpc-dev_*.deb; do
        echo "$(dpkg-deb -f "$f" Package): $(dpkg-deb -f "$f" Version)"
    done
} > "$OUT/bin/versions.txt"
cat "$OUT/bin/versions.txt"
