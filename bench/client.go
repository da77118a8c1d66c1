package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/lfmq/lfmq/engine/api/client"
)

// ServerError is a request to the server that got no usable answer
// outside the measured requests (GET /v1/models): the URL, the status (0
// when no answer came) and the server's message or the cause.
type ServerError = client.Failure

// api is the client of o's server.
func (o *Options) api() *client.Client {
	return &client.Client{URL: o.URL, APIKey: o.APIKey, HTTP: o.HTTPClient}
}

// get fetches base+path, bounded by limit bytes, with a 30 s timeout.
func (o *Options) get(ctx context.Context, path string, limit int64) ([]byte, error) {
	data, err := o.api().Do(ctx, client.Request{Path: path}, limit, 0, client.Retry{Timeout: 30 * time.Second})
	return data, client.Fail("bench", err, limit, answerMessage)
}

// answerMessage is an error answer's message: its OpenAI error object's,
// or the start of the body.
func answerMessage(e *client.Error) string {
	if e.Object != nil {
		return errorMessage(e.Object)
	}
	return clip(string(e.Body))
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
		return s, &ServerError{Who: "bench", URL: o.URL + "/v1/models", Status: 200, Msg: "not JSON: " + err.Error()}
	}
	s.Models = compact.Bytes()
	var list client.Models
	if err := json.Unmarshal(data, &list); err != nil {
		return s, &ServerError{Who: "bench", URL: o.URL + "/v1/models", Status: 200, Msg: "not a model list: " + err.Error()}
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
		return s, &ServerError{Who: "bench", URL: o.URL + "/v1/models", Status: 200, Msg: "lists no model"}
	case i < 0:
		return s, &OptionsError{"model", fmt.Sprintf("%q is not served; the server lists %s", o.Model, strings.Join(list.IDs(), ", "))}
	}
	d := list.Data[i]
	s.Model, s.Kind, s.MaxModelLen = d.ID, "unknown", d.MaxModelLen
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
