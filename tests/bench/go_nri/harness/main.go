// Runtime-side harness for `make bench-go` (tests/bench/bench_nri_go.py): containerd/nri's
// pkg/adaptation (the library containerd runs) listening on its own socket, with a sync callback
// that hands the connecting plugin the pods and containers of -sync (a serialized
// SynchronizeRequest written by the Python driver). It serves exactly one plugin:
//
//  1. waits for it to register, configure and synchronize; times the Synchronize call (request
//     marshalled and sent to reply read, the runtime's view) and RegisterPlugin's arrival to the
//     sync reply; writes the returned updates to <out>/sync-reply.pb (a SynchronizeResponse);
//  2. if -calls > 0, calls CreateContainer on the adaptation (which relays to every registered
//     plugin, here that one) -warmup times untimed, then -calls times serially, going through
//     the requests of -create (each a uint32 big-endian length then a CreateContainerRequest),
//     each after a RunPodSandbox for its pod (-run-pod, as on a node: a plugin that subscribes
//     learns the pod there) and -pod-gap later (the kubelet's CreateContainer follows the sandbox
//     after a while, not at once); writes each call's nanoseconds to <out>/create-ns.txt (and the
//     RunPodSandbox ones to <out>/runpod-ns.txt) and the last reply to <out>/create-reply.pb;
//  3. prints one JSON line of results on stdout and exits.
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/ttrpc"
	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/proto"
)

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "nri-harness: "+format+"\n", args...)
	os.Exit(1)
}

func readCreates(path string) []*api.CreateContainerRequest {
	data, err := os.ReadFile(path)
	if err != nil {
		fail("%v", err)
	}
	var out []*api.CreateContainerRequest
	for len(data) >= 4 {
		n := binary.BigEndian.Uint32(data)
		req := &api.CreateContainerRequest{}
		if err := proto.Unmarshal(data[4:4+n], req); err != nil {
			fail("create request: %v", err)
		}
		out = append(out, req)
		data = data[4+n:]
	}
	return out
}

type result struct {
	SyncNs           int64  `json:"sync_ns"`
	RegisterToSyncNs int64  `json:"register_to_sync_ns"`
	Updates          int    `json:"updates"`
	SyncError        string `json:"sync_error,omitempty"`
	Calls            int    `json:"calls"`
	SyncMessages     int32  `json:"sync_messages"`
}

func main() {
	socket := flag.String("socket", "", "where the adaptation listens")
	syncPath := flag.String("sync", "", "SynchronizeRequest the runtime holds")
	createPath := flag.String("create", "", "CreateContainerRequests (uint32 BE length + bytes each)")
	calls := flag.Int("calls", 0, "timed CreateContainer calls")
	warmup := flag.Int("warmup", 200, "untimed CreateContainer calls first")
	outDir := flag.String("out", ".", "where results go")
	wait := flag.Duration("wait", 120*time.Second, "how long to wait for the plugin")
	expectAdjust := flag.Bool("expect-adjust", true, "the plugin adjusts CreateContainer (false: a no-op floor)")
	runPod := flag.Bool("run-pod", true, "relay RunPodSandbox for the request's pod before each CreateContainer, as on a node")
	podGap := flag.Duration("pod-gap", 0, "pause between each RunPodSandbox and its CreateContainer (on a node the kubelet creates a pod's first container some time after its sandbox is up)")
	flag.Parse()
	logrus.SetLevel(logrus.WarnLevel)

	state := &api.SynchronizeRequest{}
	if *syncPath != "" {
		data, err := os.ReadFile(*syncPath)
		if err != nil {
			fail("%v", err)
		}
		if err := proto.Unmarshal(data, state); err != nil {
			fail("sync request: %v", err)
		}
	}
	var creates []*api.CreateContainerRequest
	if *calls > 0 {
		creates = readCreates(*createPath)
		if len(creates) == 0 {
			fail("no CreateContainer requests in %s", *createPath)
		}
	}

	var registered atomic.Int64
	intercept := func(ctx context.Context, u ttrpc.Unmarshaler, info *ttrpc.UnaryServerInfo, m ttrpc.Method) (interface{}, error) {
		if strings.HasSuffix(info.FullMethod, "/RegisterPlugin") {
			registered.CompareAndSwap(0, time.Now().UnixNano())
		}
		return m(ctx, u)
	}
	var syncMessages atomic.Int32 // Synchronize requests sent (nri >= 0.7 splits a state over 4 MiB)
	countSyncs := func(ctx context.Context, req *ttrpc.Request, rsp *ttrpc.Response, info *ttrpc.UnaryClientInfo, inv ttrpc.Invoker) error {
		if strings.HasSuffix(info.FullMethod, "/Synchronize") {
			syncMessages.Add(1)
		}
		return inv(ctx, req, rsp)
	}
	res := result{}
	synced := make(chan struct{})
	var syncs atomic.Int32
	var started atomic.Bool
	syncFn := func(ctx context.Context, cb adaptation.SyncCB) error {
		if !started.Load() { // Start() syncs the plugins it launched itself (none here)
			_, err := cb(ctx, nil, nil)
			return err
		}
		if syncs.Add(1) > 1 { // one plugin a harness: a second connection is a bug of the driver
			fmt.Fprintln(os.Stderr, "nri-harness: a second plugin connected; refused")
			return errors.New("one plugin a harness")
		}
		t0 := time.Now()
		updates, err := cb(ctx, state.Pods, state.Containers)
		t1 := time.Now()
		res.SyncNs = t1.Sub(t0).Nanoseconds()
		if r := registered.Load(); r != 0 {
			res.RegisterToSyncNs = t1.UnixNano() - r
		}
		res.Updates = len(updates)
		res.SyncMessages = syncMessages.Load()
		if err != nil {
			res.SyncError = err.Error()
		}
		data, merr := proto.Marshal(&api.SynchronizeResponse{Update: updates})
		if merr != nil {
			fail("%v", merr)
		}
		if werr := os.WriteFile(filepath.Join(*outDir, "sync-reply.pb"), data, 0o644); werr != nil {
			fail("%v", werr)
		}
		close(synced)
		return err
	}
	updateFn := func(context.Context, []*adaptation.ContainerUpdate) ([]*adaptation.ContainerUpdate, error) {
		return nil, nil
	}
	empty := filepath.Join(*outDir, "no-plugins")
	_ = os.MkdirAll(empty, 0o755)
	r, err := adaptation.New("nri-harness", "v0", syncFn, updateFn,
		adaptation.WithSocketPath(*socket), adaptation.WithPluginPath(empty), adaptation.WithPluginConfigPath(empty),
		adaptation.WithTTRPCOptions([]ttrpc.ClientOpts{ttrpc.WithUnaryClientInterceptor(countSyncs)}, []ttrpc.ServerOpt{ttrpc.WithUnaryServerInterceptor(intercept)}))
	if err != nil {
		fail("%v", err)
	}
	if err := r.Start(); err != nil {
		fail("start: %v", err)
	}
	started.Store(true)
	defer r.Stop()
	fmt.Println("ready")

	select {
	case <-synced:
	case <-time.After(*wait):
		fail("no plugin synchronized in %v", *wait)
	}
	if res.SyncError != "" || *calls == 0 {
		out, _ := json.Marshal(res)
		fmt.Println(string(out))
		return
	}

	ctx := context.Background()
	runPodSandbox := func(i int) {
		if err := r.RunPodSandbox(ctx, &api.StateChangeEvent{Pod: creates[i%len(creates)].Pod}); err != nil {
			fail("RunPodSandbox: %v", err)
		}
	}
	create := func(i int) *api.CreateContainerResponse {
		rpl, err := r.CreateContainer(ctx, creates[i%len(creates)])
		if err != nil {
			fail("CreateContainer: %v", err)
		}
		return rpl
	}
	// The adaptation adds the plugin to its list just after the sync callback returns.
	deadline := time.Now().Add(10 * time.Second)
	if !*expectAdjust {
		time.Sleep(50 * time.Millisecond)
	}
	for *expectAdjust && create(0).GetAdjust().GetLinux().GetResources().GetCpu().GetShares() == nil {
		if time.Now().After(deadline) {
			fail("the plugin never adjusted a CreateContainer")
		}
		time.Sleep(time.Millisecond)
	}
	for i := 0; i < *warmup; i++ {
		if *runPod {
			runPodSandbox(i)
			time.Sleep(*podGap)
		}
		create(i)
	}
	var b, pb strings.Builder
	var last *api.CreateContainerResponse
	for i := 0; i < *calls; i++ {
		if *runPod {
			t0 := time.Now()
			runPodSandbox(*warmup + i)
			pb.WriteString(strconv.FormatInt(time.Since(t0).Nanoseconds(), 10))
			pb.WriteByte('\n')
			time.Sleep(*podGap) // not timed: the pod start is the two calls' own times
		}
		t0 := time.Now()
		last = create(*warmup + i)
		b.WriteString(strconv.FormatInt(time.Since(t0).Nanoseconds(), 10))
		b.WriteByte('\n')
	}
	if err := os.WriteFile(filepath.Join(*outDir, "runpod-ns.txt"), []byte(pb.String()), 0o644); err != nil {
		fail("%v", err)
	}
	res.Calls = *calls
	if err := os.WriteFile(filepath.Join(*outDir, "create-ns.txt"), []byte(b.String()), 0o644); err != nil {
		fail("%v", err)
	}
	data, _ := proto.Marshal(last)
	if err := os.WriteFile(filepath.Join(*outDir, "create-reply.pb"), data, 0o644); err != nil {
		fail("%v", err)
	}
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
}
