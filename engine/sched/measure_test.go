package sched

import (
	"context"
	"errors"
	"testing"

	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/engine/model/load/loadtest"
)

// TestMeasureDraftCostsDamaged: on a checkpoint whose background scan
// finds a NaN weight, measuring the drafter's costs fails with what the
// scan found, naming the tensor, and returns no table. (On the tiny model
// the scan ends before a step could be timed whether or not the
// measurement waits for it, so this holds the outcome, not the wait.)
func TestMeasureDraftCostsDamaged(t *testing.T) {
	const tensor = "model.layers.3.feed_forward.experts.5.w2.weight"
	m, d := loadDraftedAt(t, loadtest.Damaged(t, tinyModel, tensor, 1234, 0x7fc1))
	table, err := MeasureDraftCosts(context.Background(), m, d, 4)
	var nf *load.NonFiniteError
	if table != nil || !errors.As(err, &nf) || nf.Tensor != tensor || nf.Index != 1234 {
		t.Fatalf("MeasureDraftCosts: table %v, error %v; want no table and the NaN of element 1234 of %s", table, err, tensor)
	}
}
