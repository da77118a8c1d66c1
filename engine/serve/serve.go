package serve

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/lfmq/lfmq/engine/api"
	"github.com/lfmq/lfmq/engine/device"
	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/engine/sample"
	"github.com/lfmq/lfmq/engine/sched"
)

// Settings is a server's configuration apart from the checkpoint and the
// device: what lfmq serve's flags set. A zero field takes the server's
// default (api.Config, sched.Config).
type Settings struct {
	// Host and Port are the address Config listens on; Start listens on a
	// loopback port of its own instead.
	Host string
	Port int
	// Threads for the model; 0 means GOMAXPROCS.
	Threads int
	// KVCacheDType is the KV cache's number format.
	KVCacheDType kv.DType
	// Sched bounds the scheduler and sets speculation and prefix caching.
	Sched sched.Config
	// ServedModelName is the model id clients send (empty: the
	// checkpoint directory's name).
	ServedModelName string
	// APIKey, if set, is required as a bearer token.
	APIKey string
	// CORSOrigins are the origins browsers may call from.
	CORSOrigins []string
	// Defaults are the sampling fields a request leaves out.
	Defaults sample.Defaults
	// Logger receives the server's log (nil: slog's default).
	Logger *slog.Logger
	// ShutdownTimeout bounds how long running requests may finish once
	// the context ends; 0 means api.DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// CacheDir, if set, keeps the prefix cache across restarts.
	CacheDir string
	// DrafterDir, if set, is a DSpark drafter for the model; Sched's
	// DraftDepth fixes its depth (0: scheduled by cost). DraftCostsFile
	// keeps its measured verify cost table (api.Config).
	DrafterDir, DraftCostsFile string
}

// InProcess is the settings of a server a command starts for itself: lfmq
// serve's defaults (scheduler, speculation and prefix caching on, the
// default sampling preset for the fields a request leaves out), up to
// maxNumSeqs sequences at once, on threads, with the KV cache in kv, and
// no log.
func InProcess(maxNumSeqs, threads int, kv kv.DType) Settings {
	defaults, _ := sample.Preset(sample.DefaultPreset)
	return Settings{Threads: threads, KVCacheDType: kv, Sched: sched.Config{MaxNumSeqs: max(maxNumSeqs, 1)},
		Defaults: defaults, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// Config is the server's configuration serving the checkpoint in modelDir
// on dev (nil: the CPU engine), listening on Host:Port.
func (s Settings) Config(modelDir string, dev device.Device) api.Config {
	return api.Config{
		Device:       dev,
		ModelDir:     modelDir,
		Addr:         net.JoinHostPort(s.Host, strconv.Itoa(s.Port)),
		Threads:      s.Threads,
		KVCacheDType: s.KVCacheDType,
		Sched:        s.Sched,
		Options: api.Options{ServedModelName: s.ServedModelName, APIKey: s.APIKey, CORSOrigins: s.CORSOrigins,
			Defaults: s.Defaults, Logger: s.Logger},
		ShutdownTimeout: s.ShutdownTimeout,
		CacheDir:        s.CacheDir,
		DrafterDir:      s.DrafterDir,
		DraftCostsFile:  s.DraftCostsFile,
	}
}

// StoppedError is a server started by Start that stopped before it
// answered /health; Err is why (nil: it returned without an error).
type StoppedError struct{ Err error }

func (e *StoppedError) Error() string {
	if e.Err == nil {
		return "the in-process server stopped"
	}
	return e.Err.Error()
}

func (e *StoppedError) Unwrap() error { return e.Err }

// healthPoll is how often Start asks a starting server whether it is
// ready.
const healthPoll = 20 * time.Millisecond

// Start serves the checkpoint in modelDir on dev with the engine's own
// server on a loopback port of this process, and waits until it answers
// /health (the model loaded and warmed up). It returns the server's base
// URL, http://127.0.0.1:PORT, and stop, which shuts it down and waits for
// it (the caller closes dev after). A server that stops first is a
// *StoppedError; a context that ends first, its error.
func Start(ctx context.Context, modelDir string, dev device.Device, s Settings) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	cfg := s.Config(modelDir, dev)
	cfg.Listener = ln
	served := make(chan error, 1)
	go func() { served <- api.Serve(sctx, cfg) }()
	stop = func() {
		cancel()
		<-served
	}
	url = "http://" + ln.Addr().String()
	for {
		select {
		case err := <-served:
			served <- err
			stop()
			return "", nil, &StoppedError{Err: err}
		case <-ctx.Done():
			stop()
			return "", nil, ctx.Err()
		case <-time.After(healthPoll):
		}
		resp, err := http.Get(url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url, stop, nil
			}
		}
	}
}
