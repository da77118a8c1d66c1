package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ServerError is a request to the server that got no usable answer
// outside the measured requests (GET /v1/models): the URL, the status (0
// when no answer came) and the server's message or the cause.
type ServerError struct {
	URL    string
	Status int
	Msg    string
	Err    error
}

func (e *ServerError) Error() string {
	switch {
	case e.Status == 0 && errors.Is(e.Err, syscall.ECONNREFUSED):
		return fmt.Sprintf("bench: no server answering at %s", e.URL)
	case e.Status == 0:
		return fmt.Sprintf("bench: %s: %v", e.URL, e.Err)
	case e.Status == http.StatusUnauthorized:
		return fmt.Sprintf("bench: %s: HTTP 401 %s; give the key with --api-key-file or LFMQ_API_KEY", e.URL, e.Msg)
	}
	return fmt.Sprintf("bench: %s: HTTP %d %s", e.URL, e.Status, e.Msg)
}

func (e *ServerError) Unwrap() error { return e.Err }

// get fetches base+path, bounded by limit bytes, with a 30 s timeout.
func (o *Options) get(ctx context.Context, path string, limit int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	u := o.URL + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, &ServerError{URL: u, Err: err}
	}
	o.authorize(req)
	resp, err := o.HTTPClient.Do(req)
	if err != nil {
		return nil, &ServerError{URL: u, Err: unwrapURL(err)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, &ServerError{URL: u, Err: err}
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &ServerError{URL: u, Status: resp.StatusCode, Msg: answerMessage(data)}
	}
	if int64(len(data)) > limit {
		return nil, &ServerError{URL: u, Status: resp.StatusCode, Msg: fmt.Sprintf("the answer is over %d bytes", limit)}
	}
	return data, nil
}

func (o *Options) authorize(req *http.Request) {
	if o.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+o.APIKey)
	}
}

// unwrapURL drops the *url.Error layer, whose text repeats the URL.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// answerMessage is an error answer's message: its OpenAI error object's,
// or the start of the body.
func answerMessage(body []byte) string {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && len(e.Error) > 0 && string(e.Error) != "null" {
		return errorMessage(e.Error)
	}
	return clip(string(body))
}

// models reads /v1/models: the model to ask for, what kind of server
// answers, and the vocabulary size it reports.
func (o *Options) models(ctx context.Context) (Server, error) {
	s := Server{URL: o.URL}
	data, err := o.get(ctx, "/v1/models", maxModelsBytes)
	if err != nil {
		return s, err
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, data); err != nil {
		return s, &ServerError{URL: o.URL + "/v1/models", Status: 200, Msg: "not JSON: " + err.Error()}
	}
	s.Models = compact.Bytes()
	var list struct {
		Data []struct {
			ID      string `json:"id"`
			OwnedBy string `json:"owned_by"`
			Lfmq    *struct {
				VocabSize int `json:"vocab_size"`
			} `json:"lfmq"`
			Meta *struct {
				NVocab int `json:"n_vocab"`
			} `json:"meta"`
		} `json:"data"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		return s, &ServerError{URL: o.URL + "/v1/models", Status: 200, Msg: "not a model list: " + err.Error()}
	}
	i := -1
	for j, d := range list.Data {
		if o.Model == "" || d.ID == o.Model {
			if i >= 0 && o.Model == "" {
				return s, &OptionsError{"model", fmt.Sprintf("the server lists %d models; name one with --model", len(list.Data))}
			}
			if i < 0 {
				i = j
			}
		}
	}
	switch {
	case i < 0 && o.Model == "":
		return s, &ServerError{URL: o.URL + "/v1/models", Status: 200, Msg: "lists no model"}
	case i < 0:
		ids := make([]string, len(list.Data))
		for j, d := range list.Data {
			ids[j] = d.ID
		}
		return s, &OptionsError{"model", fmt.Sprintf("%q is not served; the server lists %s", o.Model, strings.Join(ids, ", "))}
	}
	d := list.Data[i]
	s.Model, s.Kind = d.ID, "unknown"
	switch {
	case d.Lfmq != nil:
		s.Kind = "lfmq"
		s.Vocab, s.VocabFrom = d.Lfmq.VocabSize, "lfmq.vocab_size"
	case d.Meta != nil:
		s.Kind = "llama.cpp"
		s.Vocab, s.VocabFrom = d.Meta.NVocab, "meta.n_vocab"
	case d.OwnedBy == "vllm":
		s.Kind = "vllm"
	}
	if o.Vocab > 0 {
		s.Vocab, s.VocabFrom = o.Vocab, "--vocab"
	}
	if len(o.Dataset) > 0 {
		s.Vocab, s.VocabFrom = 0, ""
	} else if s.Vocab <= 0 {
		return s, &OptionsError{"vocab", fmt.Sprintf("the server's /v1/models does not say its vocabulary size (a %s server); give --vocab N", s.Kind)}
	}
	return s, nil
}

// scrape reads the server's counters from /metrics.
func (o *Options) scrape(ctx context.Context) (samples, error) {
	data, err := o.get(ctx, "/metrics", maxMetricsBytes)
	if err != nil {
		return nil, err
	}
	return parseMetrics(data)
}

// settled scrapes /metrics until two reads 50 ms apart agree (at most
// about a second): a server counts a request when its handler returns,
// which may be just after the client has read the end of the stream.
func (o *Options) settled(ctx context.Context) (samples, error) {
	prev, err := o.scrape(ctx)
	for i := 0; err == nil && i < 20; i++ {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		var cur samples
		if cur, err = o.scrape(ctx); err == nil && maps.Equal(prev, cur) {
			return cur, nil
		}
		prev = cur
	}
	return prev, err
}

// retryAfter reads a Retry-After header, delay seconds or an HTTP date;
// one second when it is absent or unreadable, at least 10 ms so that
// "Retry-After: 0" is not a busy loop.
func retryAfter(h string, now time.Time) time.Duration {
	d := time.Second
	if s, err := strconv.Atoi(strings.TrimSpace(h)); err == nil {
		d = time.Duration(max(s, 0)) * time.Second
	} else if t, err := http.ParseTime(h); err == nil {
		d = t.Sub(now)
	}
	return max(d, 10*time.Millisecond)
}
