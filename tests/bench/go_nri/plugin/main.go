// Go NRI plugin for `make bench-go` (tests/bench/bench_nri_go.py): the Go counterpart of hookserver's
// batchresource hook, on containerd/nri's pkg/stub. For a BE pod (label koordinator.sh/qosClass=BE)
// it reads the batch spec annotation (node.koordinator.sh/extended-resource-spec) and sets, for the
// container of that name, cpu shares = batch-cpu request milli * 1024 / 1000, cpu quota = batch-cpu
// limit milli * 100 (at least 1000; the CFS period 100000 is assumed, never written, as koordinator's
// hook does), and memory limit = the batch-memory limit: in CreateContainer as a ContainerAdjustment,
// in Synchronize as one ContainerUpdate per running container.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/sirupsen/logrus"
)

const (
	specKey     = "node.koordinator.sh/extended-resource-spec"
	qosLabel    = "koordinator.sh/qosClass"
	batchCPU    = "kubernetes.io/batch-cpu"
	batchMemory = "kubernetes.io/batch-memory"
	cfsPeriod   = 100000
)

type resources struct {
	Requests map[string]string `json:"requests"`
	Limits   map[string]string `json:"limits"`
}

type spec struct {
	Containers map[string]resources `json:"containers"`
}

type values struct {
	shares uint64
	quota  int64
	memory int64
}

// What an adjustment (CreateContainer) and an update (Synchronize) both take.
type linuxResourceSetter interface {
	SetLinuxCPUShares(uint64)
	SetLinuxCPUQuota(int64)
	SetLinuxMemoryLimit(int64)
}

// set writes the values that are there (a zero is left to the runtime).
func (v values) set(s linuxResourceSetter) {
	if v.shares > 0 {
		s.SetLinuxCPUShares(v.shares)
	}
	if v.quota > 0 {
		s.SetLinuxCPUQuota(v.quota)
	}
	if v.memory > 0 {
		s.SetLinuxMemoryLimit(v.memory)
	}
}

type plugin struct{}

// noop: the floor. Receives and decodes the same requests through the same stub, answers with nothing.
type noop struct{}

func (noop) Synchronize(context.Context, []*api.PodSandbox, []*api.Container) ([]*api.ContainerUpdate, error) {
	return nil, nil
}

func (noop) CreateContainer(context.Context, *api.PodSandbox, *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	return nil, nil, nil
}

// quantity: a Kubernetes quantity's integer value ("1500", "1k", "2Gi"); the spec's batch-cpu is in
// milli-cores already, batch-memory in bytes.
func quantity(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n * mult, err
}

// podSpec: the batch spec of a BE pod, nil when the hook leaves the pod alone.
func podSpec(pod *api.PodSandbox) *spec {
	if pod == nil || pod.GetLabels()[qosLabel] != "BE" {
		return nil
	}
	raw, found := pod.GetAnnotations()[specKey]
	if !found {
		return nil
	}
	s := &spec{}
	if err := json.Unmarshal([]byte(raw), s); err != nil {
		return nil
	}
	return s
}

// batchValues: what the hook sets for container `name` of a pod with spec s; ok false when nothing.
func batchValues(s *spec, name string) (v values, ok bool) {
	if s == nil {
		return v, false
	}
	c, found := s.Containers[name]
	if !found {
		return v, false
	}
	set := false
	if req, err := quantity(c.Requests[batchCPU]); err == nil && req > 0 {
		v.shares = uint64(req * 1024 / 1000)
		set = true
	}
	if lim, err := quantity(c.Limits[batchCPU]); err == nil && lim > 0 {
		v.quota = lim * cfsPeriod / 1000
		if v.quota < 1000 {
			v.quota = 1000
		}
		set = true
	}
	if mem, err := quantity(c.Limits[batchMemory]); err == nil && mem > 0 {
		v.memory = mem
		set = true
	}
	return v, set
}

func (plugin) Synchronize(_ context.Context, pods []*api.PodSandbox, ctrs []*api.Container) ([]*api.ContainerUpdate, error) {
	// Each pod's spec parsed once, for all its containers.
	byID := make(map[string]*spec, len(pods))
	for _, p := range pods {
		byID[p.GetId()] = podSpec(p)
	}
	var out []*api.ContainerUpdate
	for _, c := range ctrs {
		if c.GetState() != api.ContainerState_CONTAINER_RUNNING {
			continue
		}
		v, ok := batchValues(byID[c.GetPodSandboxId()], c.GetName())
		if !ok {
			continue
		}
		u := &api.ContainerUpdate{ContainerId: c.GetId()}
		v.set(u)
		out = append(out, u)
	}
	return out, nil
}

func (plugin) CreateContainer(_ context.Context, pod *api.PodSandbox, c *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	v, ok := batchValues(podSpec(pod), c.GetName())
	if !ok {
		return nil, nil, nil
	}
	a := &api.ContainerAdjustment{}
	v.set(a)
	return a, nil, nil
}

func main() {
	socket := flag.String("socket", "", "the runtime's NRI socket")
	name := flag.String("name", "gobench", "plugin name")
	idx := flag.String("idx", "10", "plugin index")
	floor := flag.Bool("noop", false, "answer every request with nothing (the floor)")
	flag.Parse()
	logrus.SetLevel(logrus.WarnLevel)
	var impl interface{} = plugin{}
	if *floor {
		impl = noop{}
	}
	s, err := stub.New(impl, stub.WithSocketPath(*socket), stub.WithPluginName(*name), stub.WithPluginIdx(*idx),
		stub.WithOnClose(func() { os.Exit(0) }))
	if err != nil {
		fmt.Fprintf(os.Stderr, "nri-plugin: %v\n", err)
		os.Exit(1)
	}
	if err := s.Run(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "nri-plugin: %v\n", err)
		os.Exit(1)
	}
}
