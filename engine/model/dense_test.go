package model_test

import (
	"sync"
	"testing"

	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
)

// The dense fixture: a dense LFM2 (model_type "lfm2") whose config uses the
// legacy key style, with its own float32 reference.
const (
	denseFixture = "../../testdata/tiny-lfm2"
	denseDir     = denseFixture + "/model"
	denseRefDir  = denseFixture + "/reference"
)

var (
	denseOnce  sync.Once
	denseModel *model.Model
	denseErr   error
)

// dense returns the dense fixture model, loaded once per test binary.
func dense(t testing.TB) *model.Model {
	t.Helper()
	denseOnce.Do(func() { denseModel, denseErr = load.Load(denseDir, load.Options{}) })
	if denseErr != nil {
		t.Fatal(denseErr)
	}
	return denseModel
}

// TestDenseReferenceLogits: the dense fixture's full-sequence and decode
// logits against its float32 reference, to the MoE fixture's tolerance,
// and its 32 greedy ids on every prompt.
func TestDenseReferenceLogits(t *testing.T) {
	m := dense(t)
	if !m.Config.Dense() || m.Config.NumMoELayers() != 0 {
		t.Fatalf("the dense fixture loaded as model_type %q with %d MoE layers", m.Config.ModelType, m.Config.NumMoELayers())
	}
	checkReferenceLogits(t, m, promptsIn(t, denseRefDir), openRefIn(t, denseRefDir, "logits.safetensors"))
}

func TestDenseIncrementalEqualsFull(t *testing.T) {
	checkIncrementalEqualsFull(t, dense(t), promptsIn(t, denseRefDir))
}

func TestDenseBatchInvariance(t *testing.T) {
	checkBatchInvariance(t, dense(t), batchInputsOf(promptsIn(t, denseRefDir)))
}

func TestDenseThreadInvariance(t *testing.T) {
	checkThreadInvariance(t, denseDir, dense(t), batchInputsOf(promptsIn(t, denseRefDir)))
}
