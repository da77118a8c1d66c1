package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/lfmq/lfmq/engine/device"
	"github.com/lfmq/lfmq/engine/device/pick"
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

// openDevice opens the device --device names (nil for the CPU engine),
// logging auto's choice on w. An explicit device that cannot be used is
// exit 1, with the library or the kernel build log in the message.
func openDevice(choice string, w io.Writer) (device.Device, error) {
	d, err := pick.Open(choice, func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) })
	if err != nil {
		return nil, fmt.Errorf("--device %s: %w", choice, err)
	}
	return d, nil
}

// closeDevice closes d if it is a device.
func closeDevice(d device.Device) {
	if d != nil {
		d.Close()
	}
}

// deviceLine names the engine a model ran on, for --stats.
func deviceLine(d device.Device) string {
	if d == nil {
		return "cpu"
	}
	return d.Info().String()
}
