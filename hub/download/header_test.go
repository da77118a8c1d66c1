package download

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
)

func TestContentRangeStart(t *testing.T) {
	for h, want := range map[string]int64{
		"bytes 0-9/10": 0, "bytes 100-199/1000": 100, "bytes 5-5/*": 5,
	} {
		if got, ok := contentRangeStart(h); !ok || got != want {
			t.Errorf("%q: %d %v", h, got, ok)
		}
	}
	for _, bad := range []string{"", "bytes", "bytes */10", "bytes 9-0/10", "bytes 0-9/9", "bytes -1-2/3", "items 0-1/2", "bytes 0-1"} {
		if _, ok := contentRangeStart(bad); ok {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestETag(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	for _, tt := range []struct {
		linked, etag, want string
	}{
		{`"` + sha + `"`, "", sha},
		{"", `W/"` + strings.ToUpper(sha) + `"`, sha},
		{"", `"abc-123"`, ""},
		{"", "", ""},
	} {
		h := http.Header{}
		if tt.linked != "" {
			h.Set("X-Linked-Etag", tt.linked)
		}
		if tt.etag != "" {
			h.Set("ETag", tt.etag)
		}
		if got := etagSHA256(h); got != tt.want {
			t.Errorf("%+v: %q", tt, got)
		}
	}
}

// FuzzContentRange checks the Content-Range parser of untrusted response
// headers: no panic, and an accepted start is the first number of a valid
// range.
func FuzzContentRange(f *testing.F) {
	f.Add("bytes 0-9/10")
	f.Add("bytes 100-199/*")
	f.Add("bytes 9223372036854775807-9223372036854775807/*")
	f.Fuzz(func(t *testing.T, h string) {
		start, ok := contentRangeStart(h)
		if !ok {
			return
		}
		rest := strings.TrimPrefix(h, "bytes ")
		first, _, _ := strings.Cut(rest, "-")
		if n, err := strconv.ParseInt(first, 10, 64); err != nil || n != start || start < 0 {
			t.Fatalf("%q: start %d", h, start)
		}
	})
}
