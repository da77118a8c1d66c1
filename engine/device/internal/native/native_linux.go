//go:build linux

// Package native opens a device's shared library with purego and binds
// its functions, the part the OpenCL and CUDA bindings share.
package native

import (
	"strings"

	"github.com/ebitengine/purego"

	"github.com/lfmq/lfmq/engine/device"
)

// Func binds one library function: Ptr points to a func variable of the C
// function's signature.
type Func struct {
	Ptr  any
	Name string
}

// F is a Func for the function name, bound to the variable ptr points to.
func F(ptr any, name string) Func { return Func{Ptr: ptr, Name: name} }

// Bind opens lib and registers every function of funcs. A library that
// does not open, or lacks a function, is a *device.Error at the library
// stage, with hint (what to install) after the loader's message.
func Bind(kind device.Kind, lib, hint string, funcs []Func) error {
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return &device.Error{Kind: kind, Stage: device.StageLibrary, Library: lib, Msg: strings.TrimPrefix(err.Error(), lib+": ") + " (" + hint + ")"}
	}
	for _, f := range funcs {
		sym, err := purego.Dlsym(h, f.Name)
		if err != nil {
			return &device.Error{Kind: kind, Stage: device.StageLibrary, Library: lib, Msg: "no " + f.Name + " (a library too old for lfmq?)"}
		}
		purego.RegisterFunc(f.Ptr, sym)
	}
	return nil
}
