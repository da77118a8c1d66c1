package chat

import (
	"math"
	"testing"
	"time"

	"github.com/ardanlabs/jinja"
)

// Expected strings are CPython 3.11's repr().
func TestPyFloat(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0.1, "0.1"},
		{1.0, "1.0"},
		{0, "0.0"},
		{1e16, "1e+16"},
		{1e15, "1000000000000000.0"},
		{123456789.125, "123456789.125"},
		{1e-4, "0.0001"},
		{1e-5, "1e-05"},
		{1.5e-7, "1.5e-07"},
		{2.5, "2.5"},
		{1e22, "1e+22"},
		{-3.25e-10, "-3.25e-10"},
		{5e-324, "5e-324"},
		{1.7976931348623157e308, "1.7976931348623157e+308"},
		{100, "100.0"},
		{0.30000000000000004, "0.30000000000000004"},
		{9007199254740993, "9007199254740992.0"},
		{1234567890123456.7, "1234567890123456.8"},
	}
	for _, tt := range tests {
		if got := pyFloat(tt.in); got != tt.want {
			t.Errorf("pyFloat(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := pyFloat(math.Copysign(0, -1)); got != "-0.0" {
		t.Errorf("pyFloat(-0.0) = %q", got)
	}
}

func TestPyStr(t *testing.T) {
	d := jinja.NewDict()
	d.AsDict().Set("k'", jinja.NewList([]jinja.Value{jinja.NewFloat(1), jinja.None(), jinja.NewBool(false)}))
	d.AsDict().Set("a", jinja.NewString("x"))
	tests := []struct {
		name string
		in   jinja.Value
		want string
	}{
		{"none", jinja.None(), "None"},
		{"true", jinja.NewBool(true), "True"},
		{"false", jinja.NewBool(false), "False"},
		{"int", jinja.NewInt(-42), "-42"},
		{"float", jinja.NewFloat(3), "3.0"},
		{"string is bare", jinja.NewString("it's"), "it's"},
		{"undefined", jinja.Undefined(), ""},
		{"dict keeps order", d, `{"k'": [1.0, None, False], 'a': 'x'}`},
		{"repr quoting and escapes", jinja.NewList([]jinja.Value{
			jinja.NewString("a"), jinja.NewString("it's"), jinja.NewString(`q"`), jinja.NewString(`b\`),
			jinja.NewString("\x00\x1f\x7f\u0080\u00a0\u00e9\u2028\ue000\U0001F600\U000e0001"),
			jinja.NewString("tab\there"), jinja.NewString(`both'"`),
		}), `['a', "it's", 'q"', 'b\\', '\x00\x1f\x7f\x80\xa0é\u2028\ue000😀\U000e0001', 'tab\there', 'both\'"']`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pyStr(tt.in); got != tt.want {
				t.Errorf("pyStr = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestStringFilter checks | string and {{ }} output end to end.
func TestStringFilter(t *testing.T) {
	args := NewObject()
	args.Set("flag", true)
	args.Set("none", nil)
	args.Set("list", []any{"a", int64(1), 2.0})
	tmpl, err := Parse(`{{ a | string }}|{{ a.list | string }}|{{ a.flag }}|{{ a.none }}|{{ a.list[2] }}`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.Render(Request{Kwargs: map[string]any{"a": args}})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{'flag': True, 'none': None, 'list': ['a', 1, 2.0]}|['a', 1, 2.0]|True|None|2.0`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// Expected strings are CPython's datetime.strftime on glibc.
func TestStrftime(t *testing.T) {
	at := time.Date(2025, 3, 4, 15, 6, 7, 123456000, time.UTC)
	tests := []struct{ format, want string }{
		{"%Y-%m-%d", "2025-03-04"},
		{"%d %B %Y", "04 March 2025"},
		{"%a %b %-d %H:%M:%S %p %I", "Tue Mar 4 15:06:07 PM 03"},
		{"%A %e %j %y %f %%", "Tuesday  4 063 25 123456 %"},
		{"%F %T %D %R %u %w", "2025-03-04 15:06:07 03/04/25 15:06 2 2"},
		{"%z%Z|%Q|%", "|%Q|%"},
	}
	for _, tt := range tests {
		if got := strftime(tt.format, at); got != tt.want {
			t.Errorf("strftime(%q) = %q, want %q", tt.format, got, tt.want)
		}
	}
}
