package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/lfmq/lfmq/engine/api/wire"
	"github.com/lfmq/lfmq/engine/device"
	"github.com/lfmq/lfmq/engine/draft"
	"github.com/lfmq/lfmq/engine/generate"
	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/engine/prefix"
	"github.com/lfmq/lfmq/engine/sched"
	"github.com/lfmq/lfmq/engine/spec"
	"github.com/lfmq/lfmq/format/identity"
	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/version"
)

// DefaultShutdownTimeout is how long running requests may finish after
// SIGINT/SIGTERM (docs/serving.md §8).
const DefaultShutdownTimeout = 30 * time.Second

// Config is everything Serve needs.
type Config struct {
	// ModelDir is the checkpoint to serve (BF16 Hugging Face or lfmq-1).
	ModelDir string
	// Addr is host:port to listen on; ignored when Listener is set.
	Addr string
	// Listener, if set, is used instead of listening on Addr (tests).
	Listener net.Listener
	// Threads for the model; 0 means GOMAXPROCS.
	Threads int
	// KVCacheDType is the KV cache's number format (kv.F32, the zero
	// value, is the float32 reference); /v1/models reports it.
	KVCacheDType kv.DType
	// Device, if set, runs the model there (Serve does not close it); nil
	// is the CPU engine.
	Device device.Device
	// Sched bounds the scheduler (MaxModelLen 0: the model's context).
	Sched sched.Config
	// Options configure the HTTP API; Identity is filled in by Serve and
	// ServedModelName defaults to the checkpoint directory's name.
	Options Options
	// ShutdownTimeout bounds how long running requests may finish once ctx
	// ends; 0 means DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// OnListen, if set, is called with the address once listening (before
	// the model is loaded: /health answers 503 until it is).
	OnListen func(addr net.Addr)
	// OnReady, if set, is called once the model is loaded and warmed up.
	OnReady func(s *Server)
	// CacheDir, if set, keeps the prefix cache across restarts: it is
	// loaded at start when it belongs to the same checkpoint and the same
	// engine, and saved at shutdown. lfmq launch binds the directory to
	// the release it serves.
	CacheDir string
	// DrafterDir, if set, is a DSpark drafter for the model
	// (docs/drafting.md): it is loaded beside the model and its drafts are
	// scheduled into verify steps by cost (Sched.DraftDepth 0) or at a
	// fixed depth.
	DrafterDir string
	// DraftCostsFile, if set, keeps the drafter's verify cost table: read
	// at start when it was measured for this model, drafter, machine and
	// build, else measured and written. Without it the table is measured
	// at every start.
	DraftCostsFile string
}

// DefaultServedModelName is the model id a server answers to when none is
// given: the checkpoint directory's name, also when the directory is
// given as "." or with a trailing slash.
func DefaultServedModelName(modelDir string) string {
	if abs, err := filepath.Abs(modelDir); err == nil {
		return filepath.Base(abs)
	}
	return filepath.Base(filepath.Clean(modelDir))
}

// Serve listens, loads and warms up the model, and serves until ctx ends;
// then it stops accepting, lets running requests finish within the
// shutdown timeout, cancels the rest and returns nil. A port in use, a
// checkpoint that does not load or fails its manifest check are errors.
func Serve(ctx context.Context, cfg Config) error {
	log := cfg.Options.Logger
	if log == nil {
		log = slog.Default()
		cfg.Options.Logger = log
	}
	if cfg.Options.ServedModelName == "" {
		cfg.Options.ServedModelName = DefaultServedModelName(cfg.ModelDir)
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	// The checkpoint is checked before anything listens, so that a wrong
	// directory fails at once with its own message.
	if st, err := os.Stat(filepath.Join(cfg.ModelDir, "config.json")); err != nil || st.IsDir() {
		return &ConfigError{Flag: "model", Msg: fmt.Sprintf("%s is not a checkpoint directory (no config.json)", cfg.ModelDir)}
	}
	id, err := identity.Of(cfg.ModelDir)
	if err != nil {
		return err
	}
	ln := cfg.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.Addr); err != nil {
			return listenError(cfg.Addr, err)
		}
	}
	srv := New(cfg.Options)
	httpSrv := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	serveErr := make(chan error, 1)
	go func() { serveErr <- httpSrv.Serve(ln) }()
	if cfg.OnListen != nil {
		cfg.OnListen(ln.Addr())
	}
	log.Info("listening; loading the model", "addr", "http://"+ln.Addr().String(), "model", cfg.ModelDir)

	// Until the engine runs, a failure closes the listener at once.
	fail := func(err error) error {
		httpSrv.Close()
		return err
	}
	start := time.Now()
	// An lfmq-1 checkpoint's structure is checked now and its files hashed
	// while the server warms up and serves: a mismatch shuts it down.
	sess, err := generate.Open(cfg.ModelDir, load.Options{Threads: cfg.Threads, Device: cfg.Device, KVCacheDType: cfg.KVCacheDType, Resident: true})
	if err != nil {
		return fail(err)
	}
	defer sess.Close()
	if n, ctx := cfg.Sched.MaxModelLen, sess.Model.MaxContext(); n > ctx {
		return fail(&ConfigError{Flag: "max-model-len", Msg: fmt.Sprintf("%d is more than the model's context, %d tokens (max_position_embeddings)", n, ctx)})
	}
	drafterID := ""
	if cfg.DrafterDir != "" {
		d, did, err := loadDrafter(ctx, &cfg, sess, id.Identity, log)
		if err != nil {
			return fail(err)
		}
		defer d.Close()
		drafterID = did
	}
	sc, err := sched.New(sess.Model, withIdentity(withLogger(cfg.Sched, log), id.Identity+drafterID))
	if err != nil {
		return fail(err)
	}
	// A pool smaller than the longest sequence would accept requests it
	// can never run (each reserves its prompt plus max_tokens): refuse it
	// now rather than answer every long request 400. The scheduler's
	// defaults (MaxNumSeqs × MaxModelLen) never are.
	if c := sc.Config(); c.KVPoolTokens < c.MaxModelLen {
		return fail(&ConfigError{Flag: "kv-pool-tokens", Msg: fmt.Sprintf("%d is less than the longest sequence, %d tokens (--max-model-len, else the model's context): "+
			"a request that uses it could never run; give at least %d, or lower --max-model-len", c.KVPoolTokens, c.MaxModelLen, c.MaxModelLen)})
	}
	binSHA, err := binarySHA256()
	if err != nil {
		return fail(err)
	}
	srv.opts.Identity = wire.Identity{CheckpointFormat: id.Format, CheckpointIdentity: id.Identity, ManifestSHA256: id.ManifestSHA256,
		ConfigSHA256: id.ConfigSHA256, TokenizerSHA256: id.TokenizerSHA256, VocabSize: sess.Model.Config.VocabSize,
		LfmqVersion: version.Version, SourceDigest: version.SourceDigest, BinarySHA256: binSHA, Device: DeviceOf(sess.Model),
		KVCacheDType: sess.Model.KVCacheDType().String()}
	if err := warmUp(ctx, sess); err != nil {
		return fail(err)
	}
	cacheFile, cacheHeader := "", prefix.Header{Identity: id.Identity,
		Runtime: version.Version + "+" + version.SourceDigest + "+" + binSHA + "+kv=" + sess.Model.KVCacheDType().String() + drafterID}
	if cfg.CacheDir != "" {
		if err := os.MkdirAll(cfg.CacheDir, 0o755); err != nil {
			return fail(fmt.Errorf("api: cache directory: %w", err))
		}
		cacheFile = filepath.Join(cfg.CacheDir, prefix.FileName)
		n, err := sc.LoadCache(cacheFile, cacheHeader)
		var stale *prefix.StaleError
		switch {
		case errors.As(err, &stale):
			log.Warn("the saved prefix cache belongs to other weights or another engine; starting cold", "why", stale.Error())
		case err != nil:
			log.Warn("the saved prefix cache cannot be read; starting cold", "err", err)
		case n > 0:
			log.Info("prefix cache loaded", "blocks", n, "file", cacheFile)
		}
	}
	schedCtx, stopSched := context.WithCancel(context.Background())
	defer stopSched()
	schedDone := make(chan error, 1)
	go func() { schedDone <- sc.Run(schedCtx) }()
	srv.SetReady(&Engine{Session: sess, Sched: sc})
	c := sc.Config()
	// Pages are allocated as sequences and the cache first take them, so
	// a pool larger than the machine's memory starts; this is what it
	// would take full. A model with sliding layers keeps their keys and
	// values in window pages, a constant number per sequence for the
	// steps the server runs (prefill chunks; verify steps of at most a
	// page), beside the full pages its other layers take per token; the
	// pool holds no more window pages than full pages (kv.PoolStats).
	ps := sc.Stats()
	sh := sess.Model.KVPool().Shape()
	maxBytes := int64(ps.KVPages) * int64(ps.KVPageBytes+ps.KVWindowPageBytes)
	fields := []any{"tokens", c.KVPoolTokens, "pages", ps.KVPages, "kv_cache_dtype", sess.Model.KVCacheDType().String(),
		"bytes_per_token", sh.FullBytesPerToken()}
	if sh.HasWindow() {
		wp := sh.WindowPages(max(c.PrefillChunk, kv.PageTokens))
		fields = append(fields, "sliding_window", sh.Window, "window_pages_per_seq", wp, "window_bytes_per_seq", wp*ps.KVWindowPageBytes)
	}
	fields = append(fields, "max_bytes", maxBytes, "max", humanBytes(maxBytes), "allocated", "on demand")
	log.Info("kv pool", fields...)
	log.Info("ready", "served_model_name", cfg.Options.ServedModelName, "format", id.Format, "identity", id.Identity, "device", srv.opts.Identity.Device.String(),
		"max_model_len", c.MaxModelLen, "max_num_seqs", c.MaxNumSeqs, "kv_pool_tokens", c.KVPoolTokens, "load_seconds", time.Since(start).Seconds())
	if cfg.OnReady != nil {
		cfg.OnReady(srv)
	}

	var integrityErr error
	verifyDone := sess.Model.VerifyDone()
	for running := true; running; {
		select {
		case err := <-serveErr:
			stopSched()
			<-schedDone
			return fmt.Errorf("api: %w", err)
		case <-ctx.Done():
			running = false
		case <-verifyDone:
			verifyDone = nil
			var nf *load.NonFiniteError
			if integrityErr = sess.Model.Verified(ctx); errors.As(integrityErr, &nf) {
				log.Error("the checkpoint holds a weight that is not a number: shutting down", "err", integrityErr)
				running = false
			} else if integrityErr != nil {
				log.Error("the checkpoint's files do not match its manifest.json: shutting down", "err", integrityErr)
				running = false
			} else if sess.Model.Format == model.SourceLFMQ1 {
				log.Info("checkpoint files verified against manifest.json", "seconds", time.Since(start).Seconds())
			}
		}
	}
	log.Info("shutting down: finishing running requests", "timeout", cfg.ShutdownTimeout)
	srv.BeginShutdown()
	sc.Close()
	sdCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := httpSrv.Shutdown(sdCtx); err != nil {
		// Time is up: cancel what still runs; handlers then answer
		// shutting_down and return.
		log.Warn("shutdown timeout: cancelling the requests still running")
		stopSched()
		drain, cancelDrain := context.WithTimeout(context.Background(), 5*time.Second)
		httpSrv.Shutdown(drain)
		cancelDrain()
		httpSrv.Close()
	}
	stopSched()
	<-schedDone
	if integrityErr != nil {
		return integrityErr
	}
	if cacheFile != "" {
		if err := sc.SaveCache(cacheFile, cacheHeader); err != nil {
			log.Warn("saving the prefix cache", "err", err)
		} else {
			log.Info("prefix cache saved", "blocks", sc.Stats().PrefixBlocks, "file", cacheFile)
		}
	}
	return nil
}

// ConfigError reports a setting that cannot serve this checkpoint; Flag
// names the lfmq serve flag.
type ConfigError struct {
	Flag string
	Msg  string
}

func (e *ConfigError) Error() string { return "--" + e.Flag + ": " + e.Msg }

// ListenError is an address the server could not listen on. It is a
// failure of the run (exit 1: another program holds the port, or the host
// is not this machine's), named by the flag to change.
type ListenError struct {
	Flag string // "port" or "host"
	Addr string
	Hint string
	Err  error
}

func (e *ListenError) Error() string {
	return fmt.Sprintf("--%s: cannot listen on %s: %v%s", e.Flag, e.Addr, e.Err, e.Hint)
}

func (e *ListenError) Unwrap() error { return e.Err }

// listenError names the flag behind an address the server cannot listen
// on, where Go's error names only the address.
func listenError(addr string, err error) error {
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return &ListenError{Flag: "port", Addr: addr, Err: err, Hint: "; give another --port (0 picks a free one)"}
	case errors.Is(err, syscall.EACCES):
		return &ListenError{Flag: "port", Addr: addr, Err: err, Hint: "; ports below 1024 need privileges"}
	}
	return &ListenError{Flag: "host", Addr: addr, Err: err}
}

// withIdentity keys the prefix cache's blocks to the checkpoint's bytes.
func withIdentity(c sched.Config, identity string) sched.Config {
	c.PrefixCache.Identity = identity
	return c
}

func withLogger(c sched.Config, log *slog.Logger) sched.Config {
	c.Logger = log
	return c
}

// warmUp runs one forward so that /health reports ready only once the
// weights have been touched and the kernels run.
func warmUp(ctx context.Context, s *generate.Session) error {
	id := 0
	if bos, ok := s.Tokenizer.BOS(); ok {
		id = bos
	}
	_, err := s.Model.Forward(ctx, []*model.Sequence{s.Model.NewSequence()}, [][]int{{id}}, model.ForwardOptions{})
	if err != nil {
		return fmt.Errorf("api: warm-up forward: %w", err)
	}
	return nil
}

// binarySHA256 hashes the running executable, reported by /v1/models.
func binarySHA256() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("api: locating the executable: %w", err)
	}
	sum, _, err := lfmq1.HashFile(exe)
	if err != nil {
		return "", fmt.Errorf("api: hashing %s: %w", exe, err)
	}
	return sum, nil
}

// humanBytes writes n in binary units (KiB, MiB, GiB) with two decimals.
func humanBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	f, u := float64(n), 0
	for f >= 1024 && u < len(units)-1 {
		f /= 1024
		u++
	}
	if u == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.2f %s", f, units[u])
}

// loadDrafter loads cfg.DrafterDir beside sess's model, and its verify
// cost table from cfg.DraftCostsFile or by measuring it; it sets the
// scheduler's drafter fields in cfg and returns the drafter and
// "+drafter=" its identity, which keys the prefix cache (a span keeps the
// drafter's context).
func loadDrafter(ctx context.Context, cfg *Config, sess *generate.Session, modelID string, log *slog.Logger) (*draft.Drafter, string, error) {
	did, err := identity.Of(cfg.DrafterDir)
	if err != nil {
		return nil, "", &ConfigError{Flag: "drafter", Msg: err.Error()}
	}
	d, err := draft.Load(cfg.DrafterDir, sess.Model)
	if err != nil {
		return nil, "", &ConfigError{Flag: "drafter", Msg: err.Error()}
	}
	h := spec.CostHeader{Model: modelID, Drafter: did.Identity, KV: sess.Model.KVCacheDType().String(),
		Threads: sess.Model.Pool().Threads(), CPU: spec.CPUName(runtime.NumCPU()), Runtime: version.Version + "+" + version.SourceDigest}
	var table *spec.Table
	if cfg.DraftCostsFile != "" {
		table, err = spec.LoadTable(cfg.DraftCostsFile, h)
		switch {
		case err == nil:
			log.Info("drafter cost table loaded", "file", cfg.DraftCostsFile)
		case errors.Is(err, os.ErrNotExist):
		default:
			log.Warn("the drafter cost table cannot be used; measuring it again", "why", err.Error())
		}
	}
	if table == nil {
		maxSeqs := cfg.Sched.MaxNumSeqs
		if maxSeqs == 0 {
			maxSeqs = sched.DefaultMaxNumSeqs
		}
		start := time.Now()
		if table, err = sched.MeasureDraftCosts(ctx, sess.Model, d, maxSeqs); err != nil {
			d.Close()
			return nil, "", err
		}
		log.Info("drafter cost table measured", "seconds", time.Since(start).Seconds())
		if cfg.DraftCostsFile != "" {
			if err := spec.SaveTable(cfg.DraftCostsFile, h, table); err != nil {
				log.Warn("the drafter cost table was not saved", "file", cfg.DraftCostsFile, "err", err)
			}
		}
	}
	c := d.Config
	log.Info("drafter", "dir", cfg.DrafterDir, "identity", did.Identity, "layers", c.NumLayers, "block_size", c.BlockSize,
		"taps", fmt.Sprint(c.TargetLayerIDs), "depth", map[bool]string{true: "scheduled", false: fmt.Sprint(cfg.Sched.DraftDepth)}[cfg.Sched.DraftDepth == 0])
	cfg.Sched.Drafter, cfg.Sched.DraftCosts = d, table
	return d, "+drafter=" + did.Identity, nil
}
