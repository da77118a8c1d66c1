package device

import "testing"

// TestInfoString: a device that runs a kernel source names its digest's
// first 12 digits; the CPU path, which runs none, names none (it once
// printed "kernels )").
func TestInfoString(t *testing.T) {
	tests := []struct {
		info Info
		want string
	}{
		{Info{Kind: CPU, Name: "amd64", Driver: "lfmq 0.1.0"}, `cpu "amd64" (lfmq 0.1.0)`},
		{Info{Kind: OpenCL, Name: "cpu-haswell", Driver: "OpenCL 3.0 PoCL", Kernel: "0123456789abcdef0123", IsCPU: true}, `opencl "cpu-haswell" (OpenCL 3.0 PoCL, kernels 0123456789ab), a CPU device`},
		{Info{Kind: CUDA, Name: "H200", Driver: "12.4", Kernel: "fedcba9876543210"}, `cuda "H200" (12.4, kernels fedcba987654)`},
	}
	for _, tt := range tests {
		if got := tt.info.String(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.info, got, tt.want)
		}
	}
}
