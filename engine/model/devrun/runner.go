package devrun

import (
	"github.com/lfmq/lfmq/engine/device"
	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/engine/model"
)

// NewState returns an empty sequence's state on the device; its buffers
// are allocated by the first step that needs them, so making a sequence
// never fails. A device keeps no pages: p is not used.
func (dm *devModel) NewState(*model.KVPool) model.SeqState { return dm.newState() }

// Owns reports whether st is a state on this model's device.
func (dm *devModel) Owns(st model.SeqState) bool {
	ds, ok := st.(*devState)
	return ok && ds.dm == dm
}

// Check refuses calibration's options: they run on the CPU engine.
func (dm *devModel) Check(opts *model.ForwardOptions) error {
	if opts.Observer != nil || opts.Layers > 0 || opts.StartLayer > 0 || opts.LastLayer != model.WholeLayer {
		return &model.InputError{What: "ForwardOptions", Msg: "Observer, Layers, StartLayer and LastLayer (calibration) run on the CPU engine, not on a device"}
	}
	return nil
}

// Reserve does nothing: each step grows its sequences' buffers on the
// device (reserve) under the device's lock.
func (dm *devModel) Reserve([]*model.Sequence, [][]int) error { return nil }

// Begin returns the model itself: its workspace on the device is sized
// by each step.
func (dm *devModel) Begin(int) model.Stepper { return dm }

// End does nothing: the workspace stays for the next call.
func (dm *devModel) End() {}

// SpanStore gives a decoded span rows of its own, which Extend copies to
// the device.
func (dm *devModel) SpanStore(*model.KVPool) kv.Store { return kv.RowStore }

// ReplaceLinear refuses: the weights were uploaded at load.
func (dm *devModel) ReplaceLinear() error {
	return &model.InputError{What: "ReplaceLinear", Msg: "the weights of a model on a device were uploaded at load; calibration runs on the CPU"}
}

// DeviceInfo describes the device.
func (dm *devModel) DeviceInfo() (device.Info, bool) { return dm.d.Info(), true }
