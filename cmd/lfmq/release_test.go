package main

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/release/bundle"
	"github.com/lfmq/lfmq/release/bundle/bundletest"
)

func TestReleaseBuildFlags(t *testing.T) {
	named := t.TempDir()
	os.WriteFile(filepath.Join(named, "config.json"), []byte(`{"_name_or_path": "LiquidAI/LFM2-8B-A1B"}`), 0o644)
	os.WriteFile(filepath.Join(named, "manifest.json"), []byte(`{}`), 0o644)
	local := t.TempDir()
	os.WriteFile(filepath.Join(local, "config.json"), []byte(`{"_name_or_path": "/home/me/models/x"}`), 0o644)
	os.WriteFile(filepath.Join(local, "manifest.json"), []byte(`{}`), 0o644)
	source := t.TempDir() // a Hugging Face checkpoint: no manifest.json
	os.WriteFile(filepath.Join(source, "config.json"), []byte(`{"_name_or_path": "LiquidAI/LFM2-8B-A1B"}`), 0o644)
	tests := []struct {
		name    string
		args    string
		check   func(t *testing.T, o *releaseBuildOptions)
		wantErr string
	}{
		{"defaults", "--checkpoint " + named + " --out o --license L --hub-repo me/r", func(t *testing.T, o *releaseBuildOptions) {
			if o.BaseModel != "LiquidAI/LFM2-8B-A1B" || o.Revision != "v1" || len(o.Platforms) != 3 || o.Source == "" {
				t.Errorf("options %+v", o)
			}
			if !slices.Equal(o.Platforms, bundle.DefaultPlatforms) {
				t.Errorf("platforms %v", o.Platforms)
			}
		}, ""},
		{"all flags", "--checkpoint c --out o --license L --notice N1 --notice N2 --evidence e --revision v2 --platforms linux/amd64 " +
			"--base-model a/b --base-revision 0123456789abcdef0123456789abcdef01234567 --hub-repo me/r --source-card card.md " +
			"--license-id other --license-name lfm1.0 --license-link LICENSE --language en --language fr --source s",
			func(t *testing.T, o *releaseBuildOptions) {
				if o.Checkpoint != "c" || o.Out != "o" || !slices.Equal(o.Notices, []string{"N1", "N2"}) || o.Evidence != "e" || o.Revision != "v2" ||
					len(o.Platforms) != 1 || o.BaseModel != "a/b" || o.HubRepo != "me/r" || o.SourceCard != "card.md" || o.LicenseID != "other" ||
					o.LicenseName != "lfm1.0" || o.LicenseLink != "LICENSE" || !slices.Equal(o.Language, []string{"en", "fr"}) || o.Source != "s" {
					t.Errorf("options %+v", o)
				}
			}, ""},
		{"no licence", "--checkpoint c --out o --base-model a/b --hub-repo me/r", nil, "--license is required"},
		{"no checkpoint", "--out o --license L --hub-repo me/r", nil, "--checkpoint is required"},
		// The card's download commands need the repo: no placeholder.
		{"no hub repo", "--checkpoint c --out o --license L --base-model a/b", nil, "--hub-repo OWNER/NAME is required: the model card's download commands"},
		{"not lfmq-1", "--checkpoint " + source + " --out o --license L --hub-repo me/r", nil, "--checkpoint " + source + ": not an lfmq-1 checkpoint (no manifest.json)"},
		{"no base model", "--checkpoint " + local + " --out o --license L --hub-repo me/r", nil, "--base-model is required"},
		{"bad platforms", "--checkpoint c --out o --license L --base-model a/b --hub-repo me/r --platforms linux", nil, "not os/arch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _ := testStreams()
			var got *releaseBuildOptions
			err := executeWith(ios, newReleaseCmd(ios, func(o *releaseBuildOptions) error { got = o; return nil }), append([]string{"release", "build"}, strings.Fields(tt.args)...)...)
			if tt.wantErr != "" {
				wantUsageError(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, got)
		})
	}
}

// TestReleaseDemo is the demo flow end to end through the commands:
// quantize, release build (a real go build, of a minimal module so it is
// quick), verify, damage a copy, verify again.
func TestReleaseDemo(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	tmp := t.TempDir()
	ckpt := filepath.Join(tmp, "ckpt")
	ios, _, stderr := testStreams()
	if code := run(context.Background(), []string{"quantize", "--model", tinyModel, "--out", ckpt, "--method", "rtn"}, ios); code != 0 {
		t.Fatalf("quantize exit %d: %s", code, stderr)
	}
	lic := filepath.Join(tmp, "LICENSE")
	os.WriteFile(lic, []byte(bundletest.License), 0o644)
	ev := filepath.Join(tmp, "evidence")
	os.Mkdir(ev, 0o755)
	manifestSHA, _, err := lfmq1.HashFile(filepath.Join(ckpt, lfmq1.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ev, "score.json"), bundletest.ScoreEvidence(t, manifestSHA), 0o644)
	os.WriteFile(filepath.Join(ev, "kl-chat.svg"), []byte(`<svg xmlns="http://www.w3.org/2000/svg"><text>KL per token: chat</text></svg>`+"\n"), 0o644)
	rel := filepath.Join(tmp, "release")
	ios, stdout, stderr := testStreams()
	args := []string{"release", "build", "--checkpoint", ckpt, "--out", rel, "--license", lic, "--evidence", ev,
		"--base-model", "test/tiny-lfm2-moe", "--hub-repo", "test/tiny-lfm2-moe-lfmq1", "--platforms", "linux/amd64", "--source", bundletest.Source(t)}
	if code := run(context.Background(), args, ios); code != 0 {
		t.Fatalf("release build exit %d: %s", code, stderr)
	}
	card, _ := os.ReadFile(filepath.Join(rel, "README.md"))
	for _, want := range []string{
		"https://huggingface.co/test/tiny-lfm2-moe-lfmq1 --revision v1", "| chat | 1,234 |",
		"This release's checkpoint (manifest sha256 `" + manifestSHA + "`) is the one candidate below, `rtn`.",
		"![KL per token: chat](evidence/kl-chat.svg)", "| **total** |  | 358 | 7,602,464 |",
	} {
		if !strings.Contains(string(card), want) {
			t.Errorf("README.md lacks %q", want)
		}
	}
	for _, want := range []string{"wrote release", "release id       tiny-lfm2-moe-lfmq1-v1", "linux/amd64", "release digest"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("release build output lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr.String(), "building runtime/lfmq-linux-amd64") {
		t.Errorf("no progress lines on stderr: %q", stderr)
	}
	ios, _, stderr = testStreams()
	if code := run(context.Background(), []string{"verify", "--release-dir", rel}, ios); code != 0 {
		t.Fatalf("verify exit %d: %s", code, stderr)
	}
	bad := filepath.Join(tmp, "bad")
	bundletest.CopyDir(t, rel, bad)
	p := filepath.Join(bad, "runtime", "lfmq-linux-amd64")
	b, _ := os.ReadFile(p)
	b[1000] ^= 0xff
	os.WriteFile(p, b, 0o755)
	ios, stdout, _ = testStreams()
	if code := run(context.Background(), []string{"verify", "--release-dir", bad}, ios); code != exitMismatch || !strings.Contains(stdout.String(), "re-fetch:\nruntime/lfmq-linux-amd64\n") {
		t.Errorf("flipped byte: exit %d\n%s", code, stdout)
	}
	// The output directory exists: a bad command line, nothing overwritten.
	ios, _, stderr = testStreams()
	if code := run(context.Background(), args, ios); code != exitUsage || !strings.Contains(stderr.String(), "--out "+rel+": exists and is not empty") {
		t.Errorf("second build into the same directory: exit %d %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(rel, "README.md")); err != nil {
		t.Errorf("the first release was touched: %v", err)
	}
}

// TestReleaseBuildExitCodes holds release build to the exit code rule: 2
// when the command line cannot work as given, 1 when an input's contents
// are refused. Every case fails before anything is built.
func TestReleaseBuildExitCodes(t *testing.T) {
	tmp := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(tmp, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(data), 0o644)
		return p
	}
	lic := write("LICENSE", bundletest.License)
	// Never read beyond its manifest's presence: every case fails first.
	ckpt := filepath.Dir(write("ckpt/manifest.json", "{}"))
	notCkpt := filepath.Dir(write("hf/config.json", "{}"))
	notEmpty := filepath.Dir(write("not-empty/keep.txt", "mine"))
	badJSON := filepath.Dir(write("bad-evidence/score.json", "{"))
	withSubdir := filepath.Dir(filepath.Dir(write("subdir-evidence/plots/kl.svg", "<svg/>")))
	// Evidence that scored another checkpoint than ckpt (whose manifest is "{}").
	otherEvidence := filepath.Join(tmp, "other-evidence")
	os.Mkdir(otherEvidence, 0o755)
	os.WriteFile(filepath.Join(otherEvidence, "score.json"), bundletest.ScoreEvidence(t, strings.Repeat("ab", 32)), 0o644)
	src := bundletest.Source(t)
	// args is the command line of a good build with the flags in edit
	// changed: a value replaces the flag's, "" leaves the flag out.
	args := func(edit map[string]string) []string {
		flags := map[string]string{
			"--checkpoint": ckpt, "--out": filepath.Join(t.TempDir(), "release"), "--license": lic,
			"--base-model": "test/tiny-lfm2-moe", "--hub-repo": "test/tiny-lfm2-moe-lfmq1",
			"--platforms": "linux/amd64", "--source": src,
		}
		maps.Copy(flags, edit)
		out := []string{"release", "build"}
		for _, k := range slices.Sorted(maps.Keys(flags)) {
			if v := flags[k]; v != "" {
				out = append(out, k, v)
			}
		}
		return out
	}
	tests := []struct {
		name string
		edit map[string]string
		code int
		want []string
	}{
		{"out not empty", map[string]string{"--out": notEmpty}, exitUsage, []string{"--out " + notEmpty + ": exists and is not empty"}},
		{"unknown licence id", map[string]string{"--license-id": "foo"}, exitUsage,
			[]string{`--license-id: "foo" is not a Hugging Face licence id`, "accepted: apache-2.0, mit,", "llama3.1", `"other", with --license-name`}},
		{"other without name", map[string]string{"--license-id": "other"}, exitUsage, []string{"--license-name: required with --license-id other"}},
		{"no hub repo", map[string]string{"--hub-repo": ""}, exitUsage, []string{"--hub-repo OWNER/NAME is required"}},
		{"bad hub repo", map[string]string{"--hub-repo": "just-a-name"}, exitUsage, []string{"--hub-repo", "not a hub repo id"}},
		{"licence missing", map[string]string{"--license": filepath.Join(tmp, "nope")}, exitUsage, []string{"--license " + filepath.Join(tmp, "nope") + ": no such file"}},
		{"checkpoint missing", map[string]string{"--checkpoint": filepath.Join(tmp, "nope")}, exitUsage, []string{"--checkpoint " + filepath.Join(tmp, "nope") + ": no such directory"}},
		{"checkpoint not lfmq-1", map[string]string{"--checkpoint": notCkpt}, exitUsage, []string{"--checkpoint " + notCkpt + ": not an lfmq-1 checkpoint (no manifest.json)"}},
		{"evidence not JSON", map[string]string{"--evidence": badJSON}, exitFailure, []string{"score.json: not valid JSON"}},
		// Named as given, with what to do (issue 45 item 7).
		{"evidence with a subdirectory", map[string]string{"--evidence": withSubdir}, exitFailure,
			[]string{"--evidence " + withSubdir + ": plots is a directory; an evidence directory holds only files"}},
		{"evidence of another checkpoint", map[string]string{"--evidence": otherEvidence}, exitUsage,
			[]string{"--evidence score.json: scores no candidate with this checkpoint's manifest sha256 44136fa355b3…", "rtn (abababababab…)"}},
		{"empty licence", map[string]string{"--license": write("empty/LICENSE", "\n")}, exitFailure, []string{"empty licence file"}},
		{"drafter missing", map[string]string{"--drafter": filepath.Join(tmp, "nope")}, exitUsage, []string{"--drafter " + filepath.Join(tmp, "nope") + ": no such directory"}},
		{"drafter not lfmq-1", map[string]string{"--drafter": notCkpt}, exitUsage, []string{"--drafter " + notCkpt + ": not an lfmq-1 checkpoint (no manifest.json)"}},
		{"source card licence", map[string]string{"--source-card": write("card/README.md", "---\nlicense: foo\n---\n")}, exitFailure, []string{`license "foo"`, "--license-id"}},
	}
	if _, err := exec.LookPath("git"); err == nil {
		// A runtime source with a change its git commit lacks.
		dirty := bundletest.Source(t)
		for _, a := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.email=t@example.org", "-c", "user.name=t", "commit", "-q", "-m", "s"}} {
			if out, err := exec.Command("git", append([]string{"-C", dirty}, a...)...).CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v: %s", a, err, out)
			}
		}
		os.WriteFile(filepath.Join(dirty, "cmd", "lfmq", "main.go"), []byte("package main\n\nfunc main() { println() }\n"), 0o644)
		tests = append(tests, struct {
			name string
			edit map[string]string
			code int
			want []string
		}{"dirty source", map[string]string{"--source": dirty}, exitUsage, []string{"uncommitted changes", "cmd/lfmq/main.go", "--allow-dirty"}})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, stdout, stderr := testStreams()
			code := run(context.Background(), args(tt.edit), ios)
			if code != tt.code {
				t.Errorf("exit %d, want %d: %s", code, tt.code, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q: %s", w, stderr)
				}
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout: %s", stdout)
			}
		})
	}
}

// TestReleaseDrafter is the drafter's way through the commands: quantize
// --drafter puts it in the checkpoint, release build takes it from there
// (a real go build of a minimal module), says so and prints its identity,
// verify checks it; --drafter off builds the release without it.
func TestReleaseDrafter(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	tmp := t.TempDir()
	ckpt := filepath.Join(tmp, "ckpt")
	ios, _, stderr := testStreams()
	if code := run(context.Background(), []string{"quantize", "--model", tinyModel, "--out", ckpt, "--method", "rtn",
		"--drafter", tinyDrafter, "--eval-corpus", tinyCode, "--drafter-records", "2"}, ios); code != 0 {
		t.Fatalf("quantize exit %d: %s", code, stderr)
	}
	_, dsum, err := lfmq1.ReadManifest(filepath.Join(ckpt, "drafter"))
	if err != nil {
		t.Fatal(err)
	}
	lic := filepath.Join(tmp, "LICENSE")
	os.WriteFile(lic, []byte(bundletest.License), 0o644)
	src := bundletest.Source(t)
	build := func(out string, extra ...string) (string, string) {
		ios, stdout, stderr := testStreams()
		args := append([]string{"release", "build", "--checkpoint", ckpt, "--out", out, "--license", lic,
			"--base-model", "test/tiny-lfm2-moe", "--hub-repo", "test/tiny-lfm2-moe-lfmq1", "--platforms", "linux/amd64", "--source", src}, extra...)
		if code := run(context.Background(), args, ios); code != 0 {
			t.Fatalf("release build %v: exit %d: %s", extra, code, stderr)
		}
		return stdout.String(), stderr.String()
	}
	rel := filepath.Join(tmp, "release")
	out, errOut := build(rel)
	if !strings.Contains(out, "drafter sha256   "+dsum) || !strings.Contains(errOut, "the release takes the checkpoint's drafter "+filepath.Join(ckpt, "drafter")) {
		t.Errorf("release build output:\n%s\nstderr:\n%s", out, errOut)
	}
	ios, vout, verr := testStreams()
	if code := run(context.Background(), []string{"verify", "--release-dir", rel, "--deep"}, ios); code != 0 {
		t.Fatalf("verify exit %d: %s%s", code, vout, verr)
	}
	if m, err := os.ReadFile(filepath.Join(rel, "drafter", "manifest.json")); err != nil || !strings.Contains(string(m), `"architecture": "dspark"`) {
		t.Errorf("release drafter manifest: %v", err)
	}
	plain := filepath.Join(tmp, "plain")
	out, _ = build(plain, "--drafter", "off")
	if _, err := os.Stat(filepath.Join(plain, "drafter")); err == nil || strings.Contains(out, "drafter") {
		t.Errorf("--drafter off: the release has a drafter:\n%s", out)
	}
}
