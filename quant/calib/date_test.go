package calib

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// modelWithTemplate returns a copy of the tiny model's tokenizer files and
// config with tmpl as its chat template.
func modelWithTemplate(t *testing.T, tmpl string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"} {
		b, err := os.ReadFile(filepath.Join(tinyModel, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "chat_template.jinja"), []byte(tmpl), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestChatDateIsPinned: a template that calls strftime_now renders the day
// the encoder was given, never the clock's. The first template prints the
// time down to the microsecond, so two loads of one calibration file made
// moments apart would differ if the clock were read; the second is the
// LFM2.5 template, which dates its system block when tools are given.
func TestChatDateIsPinned(t *testing.T) {
	lfm25, err := os.ReadFile("../../engine/chat/testdata/lfm25_v2.jinja")
	if err != nil {
		t.Fatal(err)
	}
	const (
		messages = `[{"role": "user", "content": "What is on today?"}, {"role": "assistant", "content": "Nothing."}]`
		tools    = `[{"name": "calendar"}]`
	)
	day := func(s string) time.Time {
		d, err := time.Parse(time.DateOnly, s)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	tests := []struct {
		name     string
		template string
		date     time.Time
		// want is the text the template must render around the date
		// (after BOS, before any special token); "" checks only that
		// the rendered ids hold the date.
		want string
	}{
		{"microseconds, fixed default", `{{- bos_token -}}{{- strftime_now("%Y-%m-%d %H:%M:%S.%f") -}}{%- for m in messages %} {{ m["content"] }}{% endfor -%}`,
			time.Time{}, "2025-01-01 00:00:00.000000 What is on today? Nothing."},
		{"microseconds, given day", `{{- bos_token -}}{{- strftime_now("%Y-%m-%d %H:%M:%S.%f") -}}{%- for m in messages %} {{ m["content"] }}{% endfor -%}`,
			day("2031-07-15"), "2031-07-15 00:00:00.000000 What is on today? Nothing."},
		{"LFM2.5 template", string(lfm25), day("2031-07-15"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := modelWithTemplate(t, tt.template)
			render := func(date time.Time) []int {
				enc, err := NewEncoder(dir, vocab, date)
				if err != nil {
					t.Fatal(err)
				}
				ids, err := enc.Chat([]byte(messages), []byte(tools))
				if err != nil {
					t.Fatal(err)
				}
				return ids
			}
			first := render(tt.date)
			// Let the clock move past the microseconds the first
			// rendering could have printed.
			for t0 := time.Now(); time.Since(t0) < 2*time.Millisecond; {
				time.Sleep(time.Millisecond)
			}
			if second := render(tt.date); !slices.Equal(first, second) {
				t.Fatalf("the same record and day rendered to\n%v\nand\n%v\nmoments apart: the ids follow the clock", first, second)
			}
			enc, err := NewEncoder(dir, vocab, tt.date)
			if err != nil {
				t.Fatal(err)
			}
			date := tt.date
			if date.IsZero() {
				date = day("2025-01-01")
			}
			if tt.want != "" {
				if want, _ := enc.Text(tt.want); !slices.Equal(first, want) {
					t.Errorf("rendered ids %v, want those of %q: %v", first, tt.want, want)
				}
				return
			}
			// The LFM2.5 template: the ids hold "Today's date: <day>",
			// and the next day gives other ids.
			dated, _ := enc.Text("Today's date: " + date.Format(time.DateOnly))
			if !containsRun(first, dated[1:]) {
				t.Errorf("rendered ids lack %q", "Today's date: "+date.Format(time.DateOnly))
			}
			if slices.Equal(render(date.AddDate(0, 0, 1)), first) {
				t.Error("the next day gave the same ids: the template's date is not the encoder's")
			}
		})
	}
}

// containsRun reports whether sub occurs in ids as a contiguous run.
func containsRun(ids, sub []int) bool {
	for i := 0; i+len(sub) <= len(ids); i++ {
		if slices.Equal(ids[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}
