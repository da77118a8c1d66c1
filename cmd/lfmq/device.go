package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/lfmq/lfmq/engine/device"
	"github.com/lfmq/lfmq/engine/device/pick"
	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/engine/model"
)

// deviceFlagUsage is the --device flag's help, shared by generate, serve
// (and so launch) and score.
var deviceFlagUsage = "where the model runs: " + strings.Join(pick.Choices, ", ") +
	" (auto: a CUDA GPU, else an OpenCL GPU, else the CPU); outputs are the same bits on every device"

// addDeviceFlag defines --device on f.
func addDeviceFlag(f *pflag.FlagSet, dst *string) {
	f.StringVar(dst, "device", pick.Auto, deviceFlagUsage)
}

// checkDeviceFlag is the usage check of a --device value (exit 2).
func checkDeviceFlag(choice string) error {
	if err := pick.Check(choice); err != nil {
		return &usageError{err}
	}
	return nil
}

// openDevice opens the device --device names (nil for the CPU engine)
// and returns the line saying which and why. It writes that line to w
// (if not nil) when a device was chosen; a command on the CPU keeps its output as it
// was (generate --stats and serve's log still name the engine). An
// explicit device that cannot be used is exit 1, with the library or the
// kernel build log in the message.
func openDevice(choice string, w io.Writer) (device.Device, string, error) {
	d, line, err := pick.Open(choice)
	if err != nil {
		return nil, "", fmt.Errorf("--device %s: %w", choice, err)
	}
	if d != nil && w != nil {
		fmt.Fprintln(w, line)
	}
	return d, line, nil
}

// closeDevice closes d if it is a device.
func closeDevice(d device.Device) {
	if d != nil {
		d.Close()
	}
}

// defaultKVCacheDType is --kv-cache-dtype's default on generate, serve
// (so launch) and score: half of f32's bytes at a cost the fixture's
// corpora cannot tell from zero (docs/kv-cache.md). The library's zero
// value (kv.F32) stays the float32 reference mode.
const defaultKVCacheDType = "bf16"

// addKVCacheDTypeFlag defines --kv-cache-dtype (generate, serve, launch).
func addKVCacheDTypeFlag(f *pflag.FlagSet, v *string) {
	f.StringVar(v, "kv-cache-dtype", defaultKVCacheDType, "KV cache number format: bf16, f32 (the float32 reference mode) or bfp8; each key and value is rounded once, when written")
}

// checkKVCacheDType is --kv-cache-dtype's usage check.
func checkKVCacheDType(s string) error {
	if _, err := model.ParseKVDType(s); err != nil {
		return &usageError{fmt.Errorf("--kv-cache-dtype %q: want f32, bf16 or bfp8", s)}
	}
	return nil
}

// kvCacheDType is a checked --kv-cache-dtype's format.
func kvCacheDType(s string) kv.DType {
	t, _ := model.ParseKVDType(s)
	return t
}
