package serve

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/engine/sample"
	"github.com/lfmq/lfmq/engine/sched"
)

const tinyModel = "../../testdata/tiny-lfm2-moe/model"

// TestConfig: the settings reach the server's configuration field by
// field, listening on Host:Port.
func TestConfig(t *testing.T) {
	s := Settings{Host: "::1", Port: 8080, Threads: 3, KVCacheDType: kv.BF16, Sched: sched.Config{MaxNumSeqs: 5},
		ServedModelName: "m", APIKey: "k", CORSOrigins: []string{"*"}, ShutdownTimeout: time.Second, CacheDir: "c"}
	cfg := s.Config("dir", nil)
	if cfg.Addr != "[::1]:8080" || cfg.ModelDir != "dir" || cfg.Threads != 3 || cfg.KVCacheDType != kv.BF16 ||
		cfg.Sched.MaxNumSeqs != 5 || cfg.Options.ServedModelName != "m" || cfg.Options.APIKey != "k" ||
		len(cfg.Options.CORSOrigins) != 1 || cfg.ShutdownTimeout != time.Second || cfg.CacheDir != "c" || cfg.Listener != nil {
		t.Errorf("config %+v", cfg)
	}
}

// TestInProcess: a command's own server takes serve's default sampling
// preset and at least one sequence.
func TestInProcess(t *testing.T) {
	s := InProcess(0, 2, kv.BF16)
	want, _ := sample.Preset(sample.DefaultPreset)
	if s.Sched.MaxNumSeqs != 1 || s.Threads != 2 || s.KVCacheDType != kv.BF16 || s.Logger == nil ||
		s.Defaults.Temperature == nil || *s.Defaults.Temperature != *want.Temperature {
		t.Errorf("settings %+v", s)
	}
}

// TestStart starts the tiny model in process: it answers on loopback
// once ready, and not after stop; a checkpoint that is not one is a
// StoppedError.
func TestStart(t *testing.T) {
	if testing.Short() {
		t.Skip("loads and warms up the tiny model")
	}
	ctx := context.Background()
	url, stop, err := Start(ctx, tinyModel, nil, InProcess(1, 1, kv.BF16))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var models struct {
		Data []struct{ ID string } `json:"data"`
	}
	err = json.NewDecoder(resp.Body).Decode(&models)
	resp.Body.Close()
	if err != nil || len(models.Data) != 1 || models.Data[0].ID != "model" {
		t.Errorf("/v1/models: %+v, %v", models, err)
	}
	stop()
	if _, err := http.Get(url + "/health"); err == nil {
		t.Error("the server answers after stop")
	}

	_, _, err = Start(ctx, t.TempDir(), nil, InProcess(1, 1, kv.BF16))
	var se *StoppedError
	if !errors.As(err, &se) || se.Err == nil {
		t.Errorf("a directory without a checkpoint: %v", err)
	}
}
