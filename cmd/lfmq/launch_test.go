package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lfmq/lfmq/hub/hubtest"
	"github.com/lfmq/lfmq/launch"
	"github.com/lfmq/lfmq/release/bundle"
	"github.com/lfmq/lfmq/release/bundle/bundletest"
)

func TestLaunchFlags(t *testing.T) {
	tests := []struct {
		name, args, wantErr string
		forward             []string
	}{
		{"release dir", "--release-dir r", "", nil},
		{"serve flags pass through", "--release-dir r --sampling-preset agentic --port 9 --speculate off --cors-origin http://a --cors-origin http://b --default-sampling {\"min_p\":0.1}",
			"", []string{"--cors-origin", "http://a", "--cors-origin", "http://b", "--default-sampling", `{"min_p":0.1}`, "--port", "9", "--sampling-preset", "agentic", "--speculate", "off"}},
		{"download", "--cache-root c --repo o/n --revision v1 --print-command", "", nil},
		{"nothing", "", "give a release directory", nil},
		{"both", "--release-dir r --repo o/n", "not both", nil},
		{"bad repo", "--cache-root c --repo nope --revision v1", "repo", nil},
		{"bad preset", "--release-dir r --sampling-preset wild", "unknown sampling preset", nil},
		{"bad default", "--release-dir r --default-sampling {\"temp\":1}", "temp: unknown key", nil},
		{"bad spec tokens", "--release-dir r --spec-tokens 9", "--spec-tokens", nil},
		{"no model flag", "--release-dir r --model m", "unknown flag: --model", nil},
		{"no key flag", "--release-dir r --api-key k", "unknown flag: --api-key", nil},
		{"signature flags are launch's own", "--release-dir r --allowed-signers as --identity me@x --port 9", "", []string{"--port", "9"}},
		{"identity alone", "--release-dir r --identity me@x", "--identity needs --allowed-signers", nil},
		{"device passes through", "--release-dir r --device opencl", "", []string{"--device", "opencl"}},
		{"bad device", "--release-dir r --device gpu", "auto, cpu, opencl, cuda", nil},
		// --drafter off is launch's own: the release's drafter is left out.
		{"drafter off", "--release-dir r --drafter off --port 9", "", []string{"--port", "9"}},
		{"drafter off with a depth", "--release-dir r --drafter off --draft-depth 2", "--drafter off serves without one", nil},
		// The release's drafter, which only the launch sees, may be tuned.
		{"draft depth for the release's drafter", "--release-dir r --draft-depth 2", "", []string{"--draft-depth", "2"}},
		{"another drafter passes through", "--release-dir r --drafter d", "", []string{"--drafter", "d"}},
		{"bad draft depth", "--release-dir r --draft-depth 99", "--draft-depth 99 is outside", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _ := testStreams()
			var got *launchOptions
			err := executeWith(ios, newLaunchCmd(ios, func(o *launchOptions) error { got = o; return nil }), append([]string{"launch"}, strings.Fields(tt.args)...)...)
			if tt.wantErr != "" {
				wantUsageError(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Forward, tt.forward) {
				t.Errorf("forward %q, want %q", got.Forward, tt.forward)
			}
		})
	}
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// lfmqBinary builds this command once per test binary: the runtime of
// the test releases, so that a launched release really serves.
func lfmqBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "lfmq-launch-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "lfmq")
		cmd := exec.Command("go", "build", "-o", binPath, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// servingRelease builds a release whose runtime for this platform is a
// real lfmq (the others are stand-ins).
func servingRelease(t *testing.T) string {
	t.Helper()
	return servingReleaseOf(t, "")
}

// servingReleaseOf is servingRelease of the lfmq-1 checkpoint ckpt (""
// for the MoE fixture's RTN checkpoint).
func servingReleaseOf(t *testing.T, ckpt string) string {
	t.Helper()
	bin := lfmqBinary(t)
	return bundletest.Release(t, func(o *bundle.Options) {
		if ckpt != "" {
			o.CheckpointDir = ckpt
		}
		o.Platforms = []bundle.Platform{{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH}, {GOOS: "plan9", GOARCH: "amd64"}}
		o.BuildBinary = func(ctx context.Context, p bundle.Platform, dir, ldflags, out string) error {
			if p.GOOS != runtime.GOOS || p.GOARCH != runtime.GOARCH {
				return bundletest.FakeBinary(ctx, p, dir, ldflags, out)
			}
			data, err := os.ReadFile(bin)
			if err != nil {
				return err
			}
			return os.WriteFile(out, data, 0o755)
		}
	})
}

// waitHealthy polls /health until 200.
func waitHealthy(t *testing.T, base string, exited <-chan error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(base + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("the server exited: %v", err)
		default:
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatal("the server did not become healthy")
}

// serveProcess is a serving process of the built binary or a release's
// runtime, started by startServeProcess.
type serveProcess struct {
	*exec.Cmd
	base   string      // http://127.0.0.1:port
	logs   *syncBuffer // its stderr, safe to read while it writes
	exited chan error  // receives Wait's error once
}

// startServeProcess runs bin with args, which serve on port, and waits
// until the server is healthy; the test's end kills it if it still runs.
func startServeProcess(t *testing.T, port int, bin string, args ...string) *serveProcess {
	t.Helper()
	p := &serveProcess{Cmd: exec.Command(bin, args...), base: fmt.Sprintf("http://127.0.0.1:%d", port), logs: &syncBuffer{}, exited: make(chan error, 1)}
	p.Stderr = p.logs
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.Wait() }()
	t.Cleanup(func() { p.Process.Kill() })
	waitHealthy(t, p.base, p.exited)
	return p
}

// stop sends SIGTERM and waits up to a minute for the exit, killing the
// process after that; it returns Wait's error, and whether it exited
// within the minute.
func (p *serveProcess) stop() (exited bool, err error) {
	p.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		return true, err
	case <-time.After(60 * time.Second):
		p.Process.Kill()
		return false, nil
	}
}

func chatOnce(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Post(base+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"messages":[{"role":"user","content":"What does the ls command do?"}],"max_tokens":8}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"finish_reason"`) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	return string(body)
}

// TestLaunchRuns: lfmq launch replaces itself with the release's runtime
// (a real exec, through the built binary), which answers; the command it
// executes is the one --print-command prints; SIGTERM stops it with 0.
func TestLaunchRuns(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("exec replaces the process on unix only")
	}
	rel := servingRelease(t)
	port := freePort(t)
	args := []string{"launch", "--release-dir", rel, "--port", fmt.Sprint(port), "--sampling-preset", "agentic"}

	ios, stdout, stderr := testStreams()
	if code := run(context.Background(), append(args, "--print-command"), ios); code != 0 {
		t.Fatalf("--print-command: exit %d: %s", code, stderr)
	}
	printed := strings.TrimSpace(stdout.String())
	if want := filepath.Join(rel, "runtime", "lfmq-"+runtime.GOOS+"-"+runtime.GOARCH) + " serve --model " + filepath.Join(rel, "checkpoint"); !strings.HasPrefix(printed, want) ||
		!strings.HasSuffix(printed, fmt.Sprintf("--port %d --sampling-preset agentic", port)) {
		t.Errorf("printed %s", printed)
	}
	// The in-process command hands the same command to its exec.
	var planned *launch.Plan
	ios, _, stderr = testStreams()
	launchCmd := newLaunchCmdWith(ios, nil, func(p *launch.Plan) error { planned = p; return nil })
	if err := executeWith(ios, launchCmd, args...); err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	if planned == nil || planned.Command() != printed {
		t.Fatalf("executed %v\nprinted  %s", planned, printed)
	}

	// The real thing: the built binary execs the runtime, which serves.
	if logs := launchServes(t, port, args...); !strings.Contains(logs, "exec "+printed) {
		t.Errorf("launch did not log the command it executed:\n%s", logs)
	}
}

// launchServes runs the built binary with args (a launch on port), waits
// until the runtime it executes serves, asks it one chat question, stops
// it as SIGTERM does and returns its log.
func launchServes(t *testing.T, port int, args ...string) string {
	t.Helper()
	p := startServeProcess(t, port, lfmqBinary(t), args...)
	chatOnce(t, p.base)
	exited, err := p.stop()
	if !exited {
		t.Fatal("no exit after SIGTERM")
	}
	if err != nil {
		t.Errorf("exit after SIGTERM: %v\n%s", err, p.logs.String())
	}
	return p.logs.String()
}

// TestLaunchRefuses: a tampered byte exits 3, a foreign cache and an
// unlabelled non-empty cache exit 1; nothing is executed.
func TestLaunchRefuses(t *testing.T) {
	rel := bundletest.Release(t, nil)
	runLaunch := func(args ...string) (int, string) {
		ios, _, stderr := testStreams()
		executed := false
		cmd := newLaunchCmdWith(ios, nil, func(*launch.Plan) error { executed = true; return nil })
		err := executeWith(ios, cmd, append([]string{"launch"}, args...)...)
		if executed {
			t.Errorf("%v: executed", args)
		}
		if err != nil {
			ios.Errorf("lfmq: %v\n", err)
		}
		return exitCode(err), stderr.String()
	}
	foreign := t.TempDir()
	os.WriteFile(filepath.Join(foreign, launch.IdentityFile), []byte(`{"schema":"lfmq.cache-identity/1","release_id":"x","manifest_sha256":"`+strings.Repeat("a", 64)+`","runtime_sha256":"`+strings.Repeat("b", 64)+`"}`), 0o644)
	if code, msg := runLaunch("--release-dir", rel, "--cache-dir", foreign, "--port", "0"); code != exitUsage || !strings.Contains(msg, "belongs to another release") {
		t.Errorf("foreign cache: exit %d: %s", code, msg)
	}
	junk := t.TempDir()
	os.WriteFile(filepath.Join(junk, "notes.txt"), []byte("mine"), 0o644)
	if code, msg := runLaunch("--release-dir", rel, "--cache-dir", junk); code != exitUsage || !strings.Contains(msg, "not empty") {
		t.Errorf("unlabelled cache: exit %d: %s", code, msg)
	}
	f := filepath.Join(rel, "checkpoint", "manifest.json")
	data, _ := os.ReadFile(f)
	os.WriteFile(f, append(data, ' '), 0o644)
	if code, msg := runLaunch("--release-dir", rel); code != exitMismatch || !strings.Contains(msg, "checkpoint/manifest.json") {
		t.Errorf("tampered: exit %d: %s", code, msg)
	}
}

// TestLaunchDownloaded: a release fetched from a hub (which keeps no file
// modes) by lfmq download launches by --cache-root/--repo/--revision.
func TestLaunchDownloaded(t *testing.T) {
	rel := servingRelease(t)
	srv := httptest.NewServer(hubtest.New(rel, "lfmq/tiny-lfm2-moe-lfmq1", "v1"))
	defer srv.Close()
	cache := t.TempDir()
	ios, _, stderr := testStreams()
	if code := run(context.Background(), []string{"download", srv.URL + "/lfmq/tiny-lfm2-moe-lfmq1", "--revision", "v1", "--cache-root", cache}, ios); code != 0 {
		t.Fatalf("download: exit %d: %s", code, stderr)
	}
	var planned *launch.Plan
	ios, _, stderr = testStreams()
	cmd := newLaunchCmdWith(ios, nil, func(p *launch.Plan) error { planned = p; return nil })
	if err := executeWith(ios, cmd, "launch", "--cache-root", cache, "--repo", "lfmq/tiny-lfm2-moe-lfmq1", "--revision", "v1", "--port", "0"); err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	st, err := os.Stat(planned.Binary)
	if err != nil || st.Mode().Perm()&0o111 == 0 {
		t.Fatalf("runtime %s: %v %v", planned.Binary, st.Mode(), err)
	}
	// It really runs.
	port := freePort(t)
	args := append(slices.Clone(planned.Args), "--port", fmt.Sprint(port))
	p := startServeProcess(t, port, planned.Binary, args...)
	chatOnce(t, p.base)
	if exited, err := p.stop(); !exited || err != nil {
		t.Errorf("exit: %v (within a minute of SIGTERM: %v)", err, exited)
	}
}

// TestLaunchPrintCommandExecBit: --print-command changes no file mode, so
// for a runtime that lost its execute bit it says so on stderr: the
// printed command would otherwise fail with 'permission denied'.
func TestLaunchPrintCommandExecBit(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no execute bits")
	}
	rel := filepath.Join(t.TempDir(), "release")
	bundletest.CopyDir(t, servingRelease(t), rel)
	bin := filepath.Join(rel, "runtime", "lfmq-"+runtime.GOOS+"-"+runtime.GOARCH)
	if err := os.Chmod(bin, 0o644); err != nil {
		t.Fatal(err)
	}
	ios, stdout, stderr := testStreams()
	if code := run(context.Background(), []string{"launch", "--release-dir", rel, "--print-command"}, ios); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.HasPrefix(stdout.String(), bin+" serve ") {
		t.Errorf("printed %q", stdout)
	}
	if want := "chmod +x " + bin; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q does not say %q", stderr, want)
	}
	if st, _ := os.Stat(bin); st.Mode().Perm() != 0o644 {
		t.Errorf("--print-command changed the runtime's mode to %v", st.Mode())
	}
}

// TestLaunchSigned: with --allowed-signers [--identity], launch checks the
// release signature as verify does: a good one is named and the runtime
// runs; an unsigned release, a tampered signature and another principal
// exit 3 with what to do, and nothing runs. Without the flag a bad
// signature is not read.
func TestLaunchSigned(t *testing.T) {
	signed, allowed := signedRelease(t, "")
	malformed := filepath.Join(t.TempDir(), "allowed_signers.malformed")
	os.WriteFile(malformed, []byte("release@lfmq.test ssh-ed25519\n"), 0o644)
	for _, c := range []struct {
		name    string
		prepare func(t *testing.T, dir string)
		args    []string
		code    int
		errOut  []string
	}{
		{"good", nil, []string{"--allowed-signers", allowed, "--identity", "release@lfmq.test"}, exitOK,
			[]string{"signature SHA256SUMS.sig: good, ssh-ed25519 key ", "of release@lfmq.test\n", "exec "}},
		{"good, any principal", nil, []string{"--allowed-signers", allowed}, exitOK, []string{"signature SHA256SUMS.sig: good"}},
		{"unsigned", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "SHA256SUMS.sig"))
		}, []string{"--allowed-signers", allowed, "--identity", "release@lfmq.test"}, exitMismatch,
			[]string{"signature SHA256SUMS.sig\n", "absent", "what to do: get the release with its signature", "(1 signature)"}},
		{"tampered", func(t *testing.T, dir string) { bundletest.TamperSignature(t, dir) }, []string{"--allowed-signers", allowed}, exitMismatch,
			[]string{"signature SHA256SUMS.sig\n", "what to do: do not use this release"}},
		{"another principal", nil, []string{"--allowed-signers", allowed, "--identity", "other@lfmq.test"}, exitMismatch,
			[]string{"not allowed for identity", "what to do: do not use this release"}},
		{"tampered, not checked", func(t *testing.T, dir string) { bundletest.TamperSignature(t, dir) }, nil, exitOK, []string{"exec "}},
		{"unreadable allowed signers", nil, []string{"--allowed-signers", malformed}, exitFailure, []string{"allowed_signers.malformed line 1"}},
		{"missing allowed signers", nil, []string{"--allowed-signers", allowed + ".missing"}, exitUsage, []string{"--allowed-signers " + allowed + ".missing: no such file"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rel := filepath.Join(t.TempDir(), "release")
			bundletest.CopyDir(t, signed, rel)
			if c.prepare != nil {
				c.prepare(t, rel)
			}
			for _, printOnly := range []bool{true, false} {
				ios, stdout, stderr := testStreams()
				executed := false
				cmd := newLaunchCmdWith(ios, nil, func(*launch.Plan) error { executed = true; return nil })
				args := append([]string{"launch", "--release-dir", rel, "--port", "0"}, c.args...)
				if printOnly {
					args = append(args, "--print-command")
				}
				err := executeWith(ios, cmd, args...)
				if err != nil {
					ios.Errorf("lfmq: %v\n", err)
				}
				if code := exitCode(err); code != c.code {
					t.Fatalf("%v: exit %d, want %d\n%s%s", args, code, c.code, stdout, stderr)
				}
				if executed != (c.code == exitOK && !printOnly) {
					t.Errorf("%v: executed %v", args, executed)
				}
				if printOnly {
					if c.code == exitOK && !strings.Contains(stdout.String(), " serve --model ") {
						t.Errorf("--print-command printed %q", stdout)
					}
					continue
				}
				for _, want := range c.errOut {
					if !strings.Contains(stderr.String(), want) {
						t.Errorf("stderr lacks %q:\n%s", want, stderr)
					}
				}
			}
		})
	}
}

// TestLaunchDrafter: a release with a drafter is launched with it (a real
// exec of the built binary, which drafts: /metrics counts drafter passes),
// and the plan serves without it under --drafter off; a device the
// drafter cannot run on, or drafting flags for a release without one,
// are refused before anything runs.
func TestLaunchDrafter(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("exec replaces the process on unix only")
	}
	bin := lfmqBinary(t)
	rel := bundletest.Release(t, func(o *bundle.Options) {
		o.DrafterDir = bundletest.Drafter(t, o.CheckpointDir)
		o.Platforms = []bundle.Platform{{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH}}
		o.BuildBinary = func(ctx context.Context, p bundle.Platform, dir, ldflags, out string) error {
			data, err := os.ReadFile(bin)
			if err != nil {
				return err
			}
			return os.WriteFile(out, data, 0o755)
		}
	})
	drafter := filepath.Join(rel, "drafter")
	for _, c := range []struct {
		name    string
		args    []string
		code    int
		has     []string
		hasNot  []string
		errText string
	}{
		{"with the release's drafter", nil, 0, []string{"--drafter " + drafter}, nil, ""},
		{"drafter off", []string{"--drafter", "off"}, 0, nil, []string{"--drafter"}, ""},
		{"another drafter", []string{"--drafter", "/elsewhere"}, 0, []string{"--drafter /elsewhere"}, []string{drafter}, ""},
		{"on a device", []string{"--device", "opencl"}, 0, []string{"--drafter " + drafter, "--device opencl"}, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			ios, stdout, stderr := testStreams()
			code := run(context.Background(), append([]string{"launch", "--release-dir", rel, "--print-command"}, c.args...), ios)
			if code != c.code || !strings.Contains(stderr.String(), c.errText) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, stderr, c.code, c.errText)
			}
			for _, w := range c.has {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("command %q lacks %q", stdout, w)
				}
			}
			for _, w := range c.hasNot {
				if strings.Contains(stdout.String(), w) {
					t.Errorf("command %q has %q", stdout, w)
				}
			}
		})
	}
	t.Run("release without a drafter", func(t *testing.T) {
		ios, _, stderr := testStreams()
		code := run(context.Background(), []string{"launch", "--release-dir", servingRelease(t), "--print-command", "--draft-depth", "2"}, ios)
		if code != exitUsage || !strings.Contains(stderr.String(), "--draft-depth sets how the drafter runs, but the release has no drafter") {
			t.Errorf("exit %d, stderr %q", code, stderr)
		}
	})

	port := freePort(t)
	p := startServeProcess(t, port, bin, "launch", "--release-dir", rel, "--port", fmt.Sprint(port), "--draft-depth", "2")
	defer p.stop()
	base, logs := p.base, p.logs
	chatOnce(t, base)
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`(?m)^lfmq_drafter_passes_total (\d+)`).FindStringSubmatch(string(body))
	if m == nil || m[1] == "0" {
		t.Errorf("no drafter passes in /metrics (%v):\n%s", m, logs.String())
	}
	// And their time: a count of seconds above zero.
	if m := regexp.MustCompile(`(?m)^lfmq_drafter_pass_seconds_total ([0-9.e+-]+)$`).FindStringSubmatch(string(body)); m == nil || m[1] == "0" {
		t.Errorf("no drafter pass time in /metrics (%v)", m)
	}
	if !strings.Contains(logs.String(), "serving with the release's drafter "+drafter) {
		t.Errorf("launch log:\n%s", logs.String())
	}
}
