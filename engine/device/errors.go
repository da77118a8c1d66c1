package device

import "fmt"

// Stage says where a device failed.
type Stage string

// The stages of a device's life at which it can fail.
const (
	// StageLibrary: the native library could not be loaded or lacks a
	// function.
	StageLibrary Stage = "library"
	// StageDevice: no usable device, or one without what the kernels need.
	StageDevice Stage = "device"
	// StageBuild: the kernels did not compile or JIT-load; Log holds the
	// compiler's output.
	StageBuild Stage = "build"
	// StageRun: a call failed after start (allocation, copy, launch).
	StageRun Stage = "run"
)

// Error is every error a Device or its opening returns: which kind of
// device, at which stage, what call failed with which status, and for a
// build the compiler's log.
type Error struct {
	Kind    Kind
	Stage   Stage
	Library string // the library file, for StageLibrary
	Call    string // the native call that failed, if any
	Code    int    // its status code
	Msg     string
	Log     string // build or JIT log
}

// Error implements error.
func (e *Error) Error() string {
	s := fmt.Sprintf("device %s: %s", e.Kind, e.Stage)
	if e.Library != "" {
		s = fmt.Sprintf("device %s: cannot load %s", e.Kind, e.Library)
	}
	if e.Call != "" {
		s += fmt.Sprintf(": %s returned %d", e.Call, e.Code)
	}
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.Log != "" {
		s += "\n" + e.Log
	}
	return s
}
