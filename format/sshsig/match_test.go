package sshsig

import (
	"strings"
	"testing"
	"time"
)

func TestMatchList(t *testing.T) {
	long := strings.Repeat("a", maxSubpattern)
	for _, c := range []struct {
		s, list string
		want    bool
	}{
		{"a@b", "a@b", true},
		{"a@b", "A@b", false}, // case-sensitive, as OpenSSH's principals
		{"a@b", "x,a@b", true},
		{"a@b", "*", true},
		{"a@b", "*@b", true},
		{"a@b", "?@?", true},
		{"a@b", "??@b", false},
		{"", "*", true},
		{"", "", false}, // an empty list matches nothing
		{"a", "", false},
		{"", "a,", false}, // a trailing comma ends the list
		{"", ",a", true},
		{"a", "!", false},
		{"", "!", false},
		{"a@b", "*,!a@b", false},
		{"a@b", "!a@b,*", false},
		{"c@b", "*@b,!a@b", true},
		{"a@b", "!x", false}, // a negation alone grants nothing
		{"abcabcabd", "*abd", true},
		{"abcabcabd", "a*c*d", true},
		{"abcabcabd", "a*c*e", false},
		{"a**b", "a\\*\\*b", false},
		{"lfmq-release", "git,lfmq-*", true},
		{long, long, false}, // OpenSSH's 1023-byte pattern limit
		{long[1:], long[1:], true},
		{"x", "x," + long, false},
		{strings.Repeat("a", 5000) + "b", strings.Repeat("*a", 100) + "*c", false},
	} {
		if got := matchList(c.s, c.list); got != c.want {
			t.Errorf("matchList(%q, %q) = %v, want %v", c.s, c.list, got, c.want)
		}
	}
}

func TestParseTime(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"20240229", time.Date(2024, 2, 29, 0, 0, 0, 0, time.Local), true},
		{"20240229Z", time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC), true},
		{"202402291230z", time.Date(2024, 2, 29, 12, 30, 0, 0, time.UTC), true},
		{"20240229123059UTC", time.Date(2024, 2, 29, 12, 30, 59, 0, time.UTC), true},
		{"20230229", time.Time{}, false},
		{"2024022912", time.Time{}, false},
		{"Z", time.Time{}, false},
		{"19691231Z", time.Time{}, false},
		{"2024-02-2", time.Time{}, false},
	} {
		got, err := parseTime(c.in)
		if (err == nil) != c.ok || !got.Equal(c.want) {
			t.Errorf("parseTime(%q) = %v, %v", c.in, got, err)
		}
	}
}
