#!/usr/bin/env bash
# Build the Go side of `make bench-go` (tests/bench/bench_nri_go.py): a runtime harness on the real
# NRI runtime library (github.com/containerd/nri pkg/adaptation) and a Go plugin on nri's pkg/stub.
#
# Everything comes from Debian through apt into build/go-nri/ (~2.5 GB); nothing is installed system-wide:
# `apt-get download` with a private apt tree (build/go-nri/apt: its own sources.list, lists, cache and an empty
# dpkg status) for the suites below, on the host's own configured archive and keyring (the URIs and Signed-By of
# /etc/apt/sources.list.d/*.sources or sources.list, read at run time by tests/apt_suite.py; no mirror host name
# is written here). Unpacked with dpkg-deb -x:
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
# Idempotent: the index update (once a day), downloads and unpacking are skipped when done; the two programs are
# rebuilt every time (seconds, from Go's build cache). Exit status 3 = the host names no Debian archive, or the
# network or a download failed (the bench then skips). GO_NRI_FETCH_ONLY=1 stops after the downloads.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
OUT="${GO_NRI_BUILD:-$ROOT/build/go-nri}"
GOVER="${GO_NRI_GO:-1.24}"
GOSUITE="${GO_NRI_GO_SUITE:-trixie}"
SUITE="${GO_NRI_SUITE:-forky}"
PY="${PYTHON:-$(command -v python3)}"
case "$PY" in /*) ;; */*) PY="$PWD/$PY" ;; esac  # a relative path, before the cd below
BIN="$OUT/bin-$SUITE-go$GOVER"
for tool in apt-get dpkg-deb; do
    command -v "$tool" >/dev/null || { echo "build.sh: needs $tool (a Debian host)" >&2; exit 3; }
done
mkdir -p "$OUT/debs" "$OUT/ours/src" "$BIN"
cd "$OUT"
ARCH="$(dpkg --print-architecture)"

# The private apt tree: the host's apt.conf (proxies) still applies; sources, lists, cache and status are ours.
APT="$OUT/apt"
mkdir -p "$APT/sources.list.d" "$APT/preferences.d" "$APT/lists/partial" "$APT/cache/archives/partial"
[ -e "$APT/status" ] || : > "$APT/status"
aptget() {
    apt-get -q -o Dir::Etc::SourceList="$APT/sources.list" -o Dir::Etc::SourceParts="$APT/sources.list.d" \
        -o Dir::Etc::Preferences="$APT/preferences" -o Dir::Etc::PreferencesParts="$APT/preferences.d" \
        -o Dir::State="$APT" -o Dir::State::Lists="$APT/lists" -o Dir::State::status="$APT/status" \
        -o Dir::Cache="$APT/cache" -o Acquire::GzipIndexes=false -o Acquire::Languages=none \
        -o APT::Sandbox::User="$(id -un)" "$@"
}
# The host's own archive entries (tests/apt_suite.py reads /etc/apt), each with both suites.
PYTHONPATH="$ROOT" "$PY" -c 'import sys; from tests.apt_suite import sources_list
text = sources_list(sys.argv[1:])
sys.exit("build.sh: the host apt names no Debian archive for its release (/etc/apt)") if not text else sys.stdout.write(text)' \
    "$SUITE" "$GOSUITE" > "$APT/sources.list.new" || exit 3
# Update when the sources changed or the lists are a day old (a suite's Packages move on; old debs leave the pool).
if ! cmp -s "$APT/sources.list.new" "$APT/sources.list" || [ -z "$(find "$APT/updated" -mmin -1440 2>/dev/null)" ]; then
    mv "$APT/sources.list.new" "$APT/sources.list"
    aptget update >/dev/null || { echo "build.sh: apt-get update of $SUITE/$GOSUITE failed" >&2; exit 3; }
    touch "$APT/updated"
else
    rm -f "$APT/sources.list.new"
fi

# Resolve versions and file names from the suites' lists: Go from $GOSUITE, the nri -dev closure from $SUITE
# (golang-*-dev only). One line per package: kind name version pool-file-name.
"$PY" - "$GOVER" "$SUITE" "$GOSUITE" "$ARCH" "$APT/lists" > "debs-$SUITE.list" <<'PYEOF'
import glob, re, sys
def index(suite):
    pk, prov = {}, {}
    text = "".join(open(p, encoding="utf-8").read() + "\n\n"
                   for p in sorted(glob.glob(f"{lists}/*_dists_{suite}_main_binary-*_Packages")))
    if not text.strip():
        sys.exit(f"build.sh: no Packages list of {suite} under {lists}")
    for block in text.split("\n\n"):
        d = dict(m.groups() for m in re.finditer(r"^([A-Za-z-]+): (.*)$", block, re.M))
        if "Package" in d:
            pk[d["Package"]] = d
            for p in d.get("Provides", "").split(","):
                if p.strip():
                    prov.setdefault(p.strip().split(" ")[0], d["Package"])
    return pk, prov
def line(kind, d):
    return f"{kind} {d['Package']} {d['Version']} {d['Filename'].rsplit('/', 1)[-1]}"
gover, suite, gosuite, arch, lists = sys.argv[1:6]
gopk = index(gosuite)[0]
for name in (f"golang-{gover}-go", f"golang-{gover}-src"):
    print(line("go", gopk[name]))
pk, prov = index(suite)
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
    print(line("lib", pk[n]))
PYEOF

# Download what is missing in one apt-get call (into a scratch dir, then renamed to the pool's file name).
missing=()
while read -r kind name version file; do
    [ -s "debs/$file" ] || missing+=("$name=$version")
done < "debs-$SUITE.list"
if [ "${#missing[@]}" -gt 0 ]; then
    rm -rf debs/.download && mkdir -p debs/.download
    (cd debs/.download && aptget download "${missing[@]}" >/dev/null) \
        || { echo "build.sh: apt-get download of ${#missing[@]} packages failed" >&2; exit 3; }
    while read -r kind name version file; do
        [ -s "debs/$file" ] && continue
        got=(debs/.download/"${name}"_*.deb)
        [ -s "${got[0]}" ] || { echo "build.sh: apt-get download gave no $name" >&2; exit 3; }
        mv "${got[0]}" "debs/$file"
    done < "debs-$SUITE.list"
    rm -rf debs/.download
fi
[ "${GO_NRI_FETCH_ONLY:-}" = 1 ] && { wc -l < "debs-$SUITE.list" | sed 's/$/ packages fetched/'; exit 0; }

while read -r kind name version file; do
    deb="debs/$file"
    if [ "$kind" = go ]; then dest="goroot-$GOVER"; else dest="libroot-$SUITE"; fi
    stamp="$dest/.$file"
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
        f="debs/$(awk -v n="$name" '$2 == n {print $4}' "debs-$SUITE.list")"
        echo "$(dpkg-deb -f "$f" Package): $(dpkg-deb -f "$f" Version)"
    done
} > "$BIN/versions.txt"
# bench_nri_go.py runs what build/go-nri/bin points at.
ln -sfn "$(basename "$BIN")" "$OUT/bin"
cat "$BIN/versions.txt"
