package device_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/engine/device"
)

// TestPTXIsFromThisSource: the committed PTX names the sha256 of the kernel
// source it was compiled from, and that is today's source (CI also
// recompiles it and compares every byte: scripts/gen-ptx.sh --check).
func TestPTXIsFromThisSource(t *testing.T) {
	want := "// source sha256: " + device.SourceDigest() + "\n"
	if !strings.Contains(device.PTX(), want) {
		t.Fatalf("engine/device/kernels.ptx was not compiled from this kernels.cl (want a header line %q); run scripts/gen-ptx.sh", strings.TrimSpace(want))
	}
}

// floatOp matches a PTX float arithmetic instruction: its opcode, its
// modifiers and its type.
var floatOp = regexp.MustCompile(`^\s*(?:@%p\d+\s+)?(add|sub|mul|div|fma|mad|rcp|sqrt|rsqrt|ex2|lg2|sin|cos|tanh)((?:\.[a-z0-9]+)*)\.(f32|f64)\s`)

// lintPTX returns the lines of ptx that break the exact level: float
// arithmetic without round-to-nearest-even, flushing subnormals, or
// approximate.
func lintPTX(ptx string) []string {
	var bad []string
	for i, line := range strings.Split(ptx, "\n") {
		code, _, _ := strings.Cut(line, "//")
		if strings.Contains(code, ".ftz") || strings.Contains(code, ".approx") {
			bad = append(bad, lineRef(i, line))
			continue
		}
		m := floatOp.FindStringSubmatch(code)
		if m == nil {
			continue
		}
		if !strings.Contains(m[2]+".", ".rn.") {
			bad = append(bad, lineRef(i, line))
		}
	}
	return bad
}

func lineRef(i int, line string) string {
	return strings.TrimSpace(line) + " (line " + strconv.Itoa(i+1) + ")"
}

// TestPTXLint: the PTX's float arithmetic is only .rn, never .ftz or
// .approx; and the lint would catch each of those.
func TestPTXLint(t *testing.T) {
	ptx := device.PTX()
	if !strings.Contains(ptx, "fma.rn.f32") || !strings.Contains(ptx, ".entry mm_bfp(") {
		t.Fatal("the PTX lacks the kernels' fused multiply-adds or the BFP product: not compiled from kernels.cl?")
	}
	if bad := lintPTX(ptx); len(bad) > 0 {
		t.Fatalf("PTX instructions outside the exact level:\n%s", strings.Join(bad, "\n"))
	}
	for _, line := range []string{
		"\tadd.f32 \t%f1, %f2, %f3;",
		"\tmul.ftz.f32 \t%f1, %f2, %f3;",
		"\tdiv.approx.f32 \t%f1, %f2, %f3;",
		"\tfma.rn.ftz.f32 \t%f1, %f2, %f3, %f4;",
		"\tex2.approx.ftz.f32 \t%f1, %f2;",
		"\tmad.f64 \t%fd1, %fd2, %fd3, %fd4;",
		"\t@%p1 sub.f32 \t%f1, %f2, %f3;",
	} {
		if len(lintPTX(line)) != 1 {
			t.Errorf("the lint passes %q", line)
		}
	}
	for _, line := range []string{"\tadd.rn.f32 \t%f1, %f2, %f3;", "\tcvt.rn.f32.f64 \t%f1, %fd1;", "\tadd.s32 \t%r1, %r2, %r3;", "\tsqrt.rn.f64 \t%fd1, %fd2;"} {
		if bad := lintPTX(line); len(bad) != 0 {
			t.Errorf("the lint refuses %q", line)
		}
	}
}
