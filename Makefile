# First two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PROTO_FILES := $(shell find protos -name '*.proto' | sort)

.PHONY: run test bench bench-go loadtest soak protos lint typecheck clean image image-test e2e vm-e2e replay-demo replay-check

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	mkdir -p run/hookserver.d run/state
	$(VENV)/bin/hookserver serve --standalone --config deploy/standalone.yaml

test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider tests

# The real-apiserver and real-cluster tiers (tests/kube, marker kube_e2e): for releases and for changes to
# anything that talks to the apiserver. With HOOKSERVER_E2E_KUBECONFIG set they run against that apiserver;
# without it tests/kube/e2e.sh builds and starts ../shared/tools/kube-e2e (apiserver, kubelet, scheduler; root)
# and stops it afterwards, or, without that harness, every test is skipped with its reason (-rs).
e2e: $(STAMP)
	PY=$(PY) tests/kube/e2e.sh
	@why=$$(PYTHON=$(PY) tests/vm/can-run.sh); \
	if [ -z "$$why" ]; then $(MAKE) --no-print-directory vm-e2e; else echo "make e2e: the VM tier is SKIPPED: $$why"; fi

# The VM tier (tests/vm, marker vm): a Debian 12 guest with systemd and cgroup v2 under QEMU's emulation (TCG, no
# network), the kubelet's systemd slices made by systemd, every QoS reconciler and the agent on the real kernel, and
# containerd 1.7 with runc's systemd driver and the agent as its NRI plugin. Installs QEMU, mmdebstrap, e2fsprogs
# (and busybox-static, the guest's container image) through apt-get where missing; builds the guest image once under
# build/vm (cached by a hash of its inputs; about 2-4 minutes), then boots it once per run (about 3-4 minutes on
# a 2-core machine). tests/vm/can-run.sh says why a machine cannot run it.
VM_DIR := build/vm
vm-e2e: $(STAMP)
	@why=$$(PYTHON=$(PY) tests/vm/can-run.sh); [ -z "$$why" ] || { echo "make vm-e2e: cannot run here: $$why"; exit 1; }
	NEEDS_FOR="make vm-e2e" deploy/image/needs.sh mmdebstrap qemu-system-x86_64:qemu-system-x86 mkfs.ext4:e2fsprogs
	PYTHON=$(PY) tests/vm/build-image.sh $(VM_DIR)
	HOOKSERVER_VM_IMAGE=$(VM_DIR)/current HOOKSERVER_VM_RESULTS=$(VM_DIR)/results PYTHON=$(PY) \
	  $(PY) -m pytest -q -p no:cacheprovider -rs -m vm tests/vm

# Container image, built without a container engine (see deploy/Containerfile): a Debian rootfs from
# mmdebstrap plus the project's wheels, written as an OCI layout and oci-/docker-archives under build/image.
IMAGE_VERSION := $(shell sed -n 's/^__version__ = "\(.*\)"$$/\1/p' hookserver/__init__.py)
IMAGE_TAG := hookserver:$(IMAGE_VERSION)
IMAGE_DIR := build/image
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)

# deploy/image/needs.sh installs mmdebstrap with apt-get when it is missing (a fresh machine), as $(STAMP)
# installs the venv for `make test`.
image: $(STAMP)
	@start=$$(date +%s); \
	deploy/image/needs.sh || exit 1; \
	export SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH); \
	PYTHON=$(PY) deploy/image/build-rootfs.sh $(IMAGE_DIR) && \
	$(PY) deploy/image/oci.py --containerfile deploy/Containerfile --context . \
	  --build-arg VERSION=$(IMAGE_VERSION) --tag $(IMAGE_TAG) --out $(IMAGE_DIR) >/dev/null && \
	echo "make image: $(IMAGE_TAG) in $$(( $$(date +%s) - start )) s: $$(du -h $(IMAGE_DIR)/$(subst :,-,$(IMAGE_TAG)).oci.tar | cut -f1) compressed; details in $(IMAGE_DIR)/image.json"

image-test: $(STAMP)
	HOOKSERVER_IMAGE_DIR=$(IMAGE_DIR) $(PY) -m pytest -q -p no:cacheprovider -rs -s -m image tests/image

bench: $(STAMP)
	$(PY) -m tests.bench

# hookserver's NRI plugin against a Go plugin (nri pkg/stub), both driven by containerd/nri's pkg/adaptation
# (tests/bench/bench_nri_go.py). tests/bench/go_nri/build.sh first fetches Go and the NRI library as Debian
# packages through apt (`apt-get download`, a private apt tree on the host's own configured archive) into
# build/go-nri/ (once; ~3.3 GB) and builds the two Go programs; without network the bench prints a skipped row. Run it on a quiet node: it times both plugins side by side.
bench-go: $(STAMP)
	@if PYTHON=$(PY) tests/bench/go_nri/build.sh; then bin=build/go-nri/bin; \
	else echo "bench-go: the Go build failed (above): skipping the Go comparison"; bin=/nonexistent; fi; \
	GO_NRI_BIN=$$bin $(PY) -m tests.bench nri_go

# The flight recorder's what-if replay (docs/operations.md, "Replay a node's day"): a synthetic day of a
# 200-pod node, a real half hour of this machine's cgroups and a real agent's 8 minutes on cgroup v1 with
# evictions and a spike (deploy/replay/), each replayed as recorded and under deploy/replay's proposals; text on
# the terminal, HTML in run/replay/.
REPLAY_OUT := run/replay
$(VENV)/.report-stamp: $(STAMP)
	$(PY) -m pip install -q -e '.[dev,report]'
	touch $@

replay-demo: $(VENV)/.report-stamp
	mkdir -p $(REPLAY_OUT)
	test -f $(REPLAY_OUT)/synthetic-day.sqlite || $(PY) -m hookserver.recorder.scenarios.synthetic $(REPLAY_OUT)/synthetic-day.sqlite
	$(VENV)/bin/hookctl replay $(REPLAY_OUT)/synthetic-day.sqlite --slo deploy/replay/proposed-nodeslo.yaml \
		--colocation deploy/replay/proposed-colocation.json --predictor safety_margin_percent=0 \
		--html $(REPLAY_OUT)/synthetic-day.html
	$(VENV)/bin/hookctl replay deploy/replay/cgroup-30min.sqlite --slo deploy/replay/proposed-nodeslo-cgroup.yaml \
		--colocation deploy/replay/proposed-colocation.json --html $(REPLAY_OUT)/cgroup-30min.html
	$(VENV)/bin/hookctl replay deploy/replay/real-v1-8min.sqlite --slo deploy/replay/proposed-nodeslo-real-v1.yaml \
		--gate BECPUEvict=true --html $(REPLAY_OUT)/real-v1-8min.html
	@echo "open $(REPLAY_OUT)/synthetic-day.html, cgroup-30min.html and real-v1-8min.html in a browser"

# The report's browser check needs Chromium (Debian's package; root to install) and the report extra.
replay-check: $(VENV)/.report-stamp
	command -v chromium >/dev/null || (apt-get update -q && apt-get install -y -q chromium chromium-driver)
	$(PY) -m pytest -q -rs -p no:cacheprovider tests/recorder/test_report.py

# The apiserver load test (tests/bench/apiserver_load.py): NODES simulated nodes' informers and NodeMetric reporters
# in one process against a real kube-apiserver (its own, on port 6543, from the kube-e2e harness's binaries; or
# HOOKSERVER_E2E_KUBECONFIG's, then without a restart), then an apiserver restart. About 5 minutes.
NODES ?= 50
LOADTEST_ARGS ?= --restart
loadtest: $(STAMP)
	$(PY) -m tests.bench.apiserver_load --nodes $(NODES) $(LOADTEST_ARGS)

# The fault campaign (tests/soak, docs/operations.md): the real daemon through kill -9, NRI restarts, injected
# I/O, full-disk, clock and apiserver faults and pod churn; about 10 minutes (SOAK_SCALE=2 doubles it; it judges
# the same at any scale, and `make test` runs it at 0.025). Needs root and a cgroup v1 hierarchy; leaves a table on
# stdout and build/soak/report.json.
soak: $(STAMP)
	$(PY) -m tests.soak

protos: $(STAMP)
	$(PY) -m grpc_tools.protoc -I protos --python_out=. --pyi_out=. --grpc_python_out=. $(PROTO_FILES)

typecheck: $(STAMP)
	$(PY) -m mypy

lint: $(STAMP)
	$(VENV)/bin/lint-imports

clean:
	rm -rf $(VENV) run .pytest_cache .mypy_cache
