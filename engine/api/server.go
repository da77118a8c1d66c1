package api

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"github.com/lfmq/lfmq/engine/device"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/version"
	"log/slog"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lfmq/lfmq/engine/api/wire"
	"github.com/lfmq/lfmq/engine/generate"
	"github.com/lfmq/lfmq/engine/sample"
	"github.com/lfmq/lfmq/engine/sched"
	"github.com/lfmq/lfmq/internal/httpstatus"
)

// DeviceOf describes the engine m runs on.
func DeviceOf(m *model.Model) device.Info {
	if info, ok := m.DeviceInfo(); ok {
		return info
	}
	return device.Info{Kind: device.CPU, Name: runtime.GOARCH, Driver: "lfmq " + version.Version}
}

// Options configure a Server.
type Options struct {
	// ServedModelName is the model id clients send and /v1/models lists.
	ServedModelName string
	// APIKey, if set, is required as "Authorization: Bearer KEY" on every
	// route but /health and /metrics.
	APIKey string
	// CORSOrigins lists the origins allowed to call the API from a
	// browser ("*" allows any); empty turns CORS off.
	CORSOrigins []string
	// Defaults are the server's sampling defaults (preset plus
	// --default-sampling).
	Defaults sample.Defaults
	// Identity is reported by /v1/models.
	Identity wire.Identity
	// Logger receives request logs; nil means slog.Default().
	Logger *slog.Logger
}

// Engine is what serves requests once the model is loaded and warmed up.
type Engine struct {
	Session *generate.Session
	Sched   *sched.Scheduler
}

// Server is the HTTP API. It answers /health and /metrics from the start,
// and 503 model_not_ready on the API routes until SetReady.
type Server struct {
	opts     Options
	log      *slog.Logger
	metrics  *metrics
	engine   atomic.Pointer[engineState]
	shutdown atomic.Bool
	created  int64
}

// engineState is the ready engine with what the handlers derive from it.
type engineState struct {
	*Engine
	vocab      *vocabInfo
	maxLen     int
	vocabSize  int
	renderCall bool          // the chat template renders tool_calls itself
	scoring    chan struct{} // slots for closed-schema scoring
}

// New returns a server that is not ready yet.
func New(opts Options) *Server {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Server{opts: opts, log: log, created: time.Now().Unix()}
	s.metrics = newMetrics(func() (sched.Stats, bool) {
		e := s.engine.Load()
		if e == nil {
			return sched.Stats{}, false
		}
		return e.Sched.Stats(), true
	})
	return s
}

// SetReady starts serving requests with e (the model is loaded and a
// warm-up forward ran).
func (s *Server) SetReady(e *Engine) {
	st := &engineState{Engine: e, vocab: newVocabInfo(e.Session.Tokenizer), maxLen: e.Sched.Config().MaxModelLen,
		vocabSize: e.Session.Model.Config.VocabSize, scoring: make(chan struct{}, e.Sched.Config().MaxNumSeqs)}
	if t := e.Session.Template; t != nil {
		st.renderCall = strings.Contains(t.Source(), "tool_calls")
	}
	s.engine.Store(st)
}

// BeginShutdown makes /health answer 503 shutting_down and refuses new
// API requests with it; running requests go on.
func (s *Server) BeginShutdown() { s.shutdown.Store(true) }

// Handler returns the server's routes with auth, CORS and metrics.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /health", s.route("/health", false, s.health))
	mux.Handle("GET /metrics", s.route("/metrics", false, promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}).ServeHTTP))
	mux.Handle("GET /v1/models", s.route("/v1/models", true, s.models))
	// The served name may hold a slash (an organization's repository), so
	// the id is the whole rest of the path.
	mux.Handle("GET /v1/models/{id...}", s.route("/v1/models/{id}", true, s.model))
	mux.Handle("POST /v1/chat/completions", s.route("/v1/chat/completions", true, s.chat))
	mux.Handle("POST /v1/completions", s.route("/v1/completions", true, s.completions))
	// The catch-all answers in the API's error shape what the mux itself
	// would answer in plain text: a wrong method 405, any other path 404.
	mux.Handle("/", s.route("other", true, func(w http.ResponseWriter, r *http.Request) { notARoute(w, r, mux) }))
	return s.cors(mux)
}

// notARoute answers what no route of mux matched: 405 with Allow when
// mux routes the path with other methods, 404 otherwise.
func notARoute(w http.ResponseWriter, r *http.Request, mux *http.ServeMux) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost} {
		if _, pattern := mux.Handler(&http.Request{Method: m, URL: r.URL, Host: r.Host}); pattern != "/" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		(&Error{Status: http.StatusMethodNotAllowed, Type: typeInvalidRequest, Code: "method_not_allowed",
			Message: r.Method + " is not allowed on " + r.URL.Path + "; use " + allow[0]}).write(w)
		return
	}
	(&Error{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: "not_found",
		Message: r.Method + " " + r.URL.Path + " is not a route of this server; see /v1/models, /v1/chat/completions, /v1/completions, /health, /metrics"}).write(w)
}

// statusClientClosed labels, in the request metrics, a request whose client
// disconnected before any answer was written (nginx's 499).
const statusClientClosed = 499

// route wraps a handler with auth (when authed and a key is set) and the
// request metrics.
func (s *Server) route(name string, authed bool, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &httpstatus.Writer{ResponseWriter: w}
		defer func() {
			status := sw.Status
			switch {
			case status == 0 && r.Context().Err() != nil:
				// Nothing was written because the client went away
				// first: nginx's "client closed request", not a 200.
				status = statusClientClosed
			case status == 0:
				status = http.StatusOK
			}
			s.metrics.requests.WithLabelValues(name, strconv.Itoa(status)).Inc()
			s.metrics.duration.WithLabelValues(name).Observe(time.Since(start).Seconds())
		}()
		if authed && s.opts.APIKey != "" && !s.authorized(r) {
			(&Error{Status: http.StatusUnauthorized, Type: typeAuthentication, Code: "invalid_api_key",
				Message: "missing or wrong API key: send it as Authorization: Bearer KEY"}).write(sw)
			return
		}
		h(sw, r)
	})
}

// authorized compares the bearer token in constant time. The scheme's
// name is case-insensitive (RFC 9110 §11.1): some clients send "bearer".
func (s *Server) authorized(r *http.Request) bool {
	scheme, got, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(s.opts.APIKey)) == 1
}

// cors answers preflight requests and sets the allow headers for the
// listed origins; without origins it does nothing.
func (s *Server) cors(next http.Handler) http.Handler {
	if len(s.opts.CORSOrigins) == 0 {
		return next
	}
	any := slices.Contains(s.opts.CORSOrigins, "*")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin != "" && (any || slices.Contains(s.opts.CORSOrigins, origin)) {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Add("Vary", "Origin")
			if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
				h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
				h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
				h.Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// ready returns the engine, or writes 503 (not ready or shutting down).
func (s *Server) ready(w http.ResponseWriter) *engineState {
	if s.shutdown.Load() {
		(&Error{Status: http.StatusServiceUnavailable, Type: typeUnavailable, Code: "shutting_down", Message: "the server is shutting down"}).write(w)
		return nil
	}
	e := s.engine.Load()
	if e == nil {
		(&Error{Status: http.StatusServiceUnavailable, Type: typeUnavailable, Code: "model_not_ready", Message: "the model is loading; retry when /health answers 200", RetryAfter: 1}).write(w)
	}
	return e
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if s.ready(w) == nil {
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	e := s.ready(w)
	if e == nil {
		return
	}
	writeJSON(w, http.StatusOK, wire.ModelList{Object: "list", Data: []wire.Model{s.card(e)}})
}

// model answers GET /v1/models/{id}: the served model's card, or 404
// model_not_found for another name.
func (s *Server) model(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if id == "" {
		s.models(w, r) // "/v1/models/" lists, as "/v1/models" does
		return
	}
	if err := s.checkModel(id); err != nil {
		err.write(w)
		return
	}
	if e := s.ready(w); e != nil {
		writeJSON(w, http.StatusOK, s.card(e))
	}
}

// card describes the served model as /v1/models lists it.
func (s *Server) card(e *engineState) wire.Model {
	return wire.Model{ID: s.opts.ServedModelName, Object: "model", Created: s.created, OwnedBy: "lfmq", MaxModelLen: e.maxLen,
		Lfmq: &wire.ModelDetail{Identity: s.opts.Identity, SamplingDefaults: s.opts.Defaults}}
}

// checkModel answers 404 model_not_found for another model's name; an
// empty name means the served one.
func (s *Server) checkModel(name string) *Error {
	if name == "" || name == s.opts.ServedModelName {
		return nil
	}
	return &Error{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: "model_not_found", Param: "model",
		Message: "the model " + strconv.Quote(name) + " does not exist; this server serves " + strconv.Quote(s.opts.ServedModelName)}
}

// writeJSON writes v compactly without HTML escaping.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// marshal encodes v compactly without HTML escaping and without the
// trailing newline.
func marshal(v any) []byte {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	return []byte(strings.TrimSuffix(b.String(), "\n"))
}

// newID returns prefix + 32 random hex digits.
func newID(prefix string) string {
	var b [16]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// submit queues a job, mapping the scheduler's refusals to API errors. A
// job that asks for nothing to run (a completions echo of max_tokens 0)
// ends at once.
func (s *Server) submit(ctx context.Context, e *engineState, j *job) *Error {
	if j.maxTokens == 0 && !j.promptLogits {
		for _, o := range j.outs {
			o.Done(sched.FinishLength, nil)
		}
		return nil
	}
	r := &sched.Request{ID: j.id, Prompt: j.prompt, MaxTokens: j.maxTokens, Params: j.params, PromptLogits: j.promptLogits, CacheSalt: j.cacheSalt, Sink: j.out}
	for i, o := range j.outs[1:] {
		r.Candidates = append(r.Candidates, sched.Candidate{Seed: sched.CandidateSeed(j.params.Seed, i+1), Sink: o})
	}
	err := e.Sched.Submit(ctx, r)
	if err == nil {
		s.metrics.promptTokens.Add(float64(len(j.prompt)))
		s.log.Debug("request admitted to the queue", "id", j.id, "prompt_tokens", len(j.prompt), "max_tokens", j.maxTokens, "n", len(j.outs), "seed", j.params.Seed)
		return nil
	}
	return s.submitError(err)
}

// submitError is the API error for a request the scheduler refused
// (Submit or Lease).
func (s *Server) submitError(err error) *Error {
	var le *sched.LimitError
	var ie *sched.InputError
	switch {
	case errors.Is(err, sched.ErrQueueFull):
		s.metrics.queueRejections.Inc()
		return &Error{Status: http.StatusTooManyRequests, Type: typeRateLimit, Code: "queue_full", RetryAfter: 1,
			Message: "the server's wait queue is full; retry later"}
	case errors.Is(err, sched.ErrClosed):
		return &Error{Status: http.StatusServiceUnavailable, Type: typeUnavailable, Code: "shutting_down", Message: "the server is shutting down"}
	case errors.As(err, &le):
		switch le.What {
		case "context":
			return contextExceeded("%s", le.Error())
		case "max_num_seqs":
			return badRequest("n", "%s", le.Error())
		}
		if le.N > 1 {
			return badRequest("n", "%s", le.Error())
		}
		return badRequest("max_tokens", "%s", le.Error())
	case errors.As(err, &ie):
		return badRequest("", "%s", strings.TrimPrefix(ie.Msg, "sample: "))
	}
	return &Error{Status: http.StatusInternalServerError, Type: typeServer, Message: err.Error()}
}
