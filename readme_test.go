package lfmq_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lfmq/lfmq/evidence"
	"github.com/lfmq/lfmq/evidence/card"
	"github.com/lfmq/lfmq/evidence/report"
	"github.com/lfmq/lfmq/release/bundle"
	"github.com/lfmq/lfmq/release/bundle/bundletest"
)

// readmeSkip says why a documented command is not run by
// TestREADMECommands, or "" to run it. Those skipped need the network or a
// hub account (a model named by its hub id among them), run for minutes
// (make demo and make test are CI's own steps; release build compiles the
// runtime), start a server in the background, or name files the reader
// substitutes (placeholders, a home directory) or that make demo writes.
// The README tour's release build and its server in the background are
// run their own way (buildTourRelease, runTourServer).
func readmeSkip(cmd string) string {
	switch {
	case strings.HasPrefix(cmd, "make "):
		return "a make target (CI runs make test; make demo takes minutes)"
	case strings.Contains(cmd, "://"), strings.Contains(cmd, "HF_TOKEN"), strings.Contains(cmd, "--cache-root"), strings.Contains(cmd, "LiquidAI/"):
		return "needs the network or a hub"
	case strings.Contains(cmd, " release build "):
		return "compiles the runtime from the clone (minutes; a clone with uncommitted changes needs --allow-dirty)"
	case strings.HasSuffix(cmd, "&"), strings.HasPrefix(cmd, "curl "):
		return "a server in the background"
	case strings.Contains(cmd, "~/"), regexp.MustCompile(`<[a-z ]+>`).MatchString(cmd):
		return "names the reader's own files"
	case strings.Contains(cmd, "demo-out/"):
		return "uses make demo's output"
	case !strings.HasPrefix(cmd, "bin/lfmq ") && !strings.HasPrefix(cmd, "lfmq ") && !strings.HasPrefix(cmd, "printf "):
		return "not an lfmq command"
	}
	return ""
}

// commandPages are the pages whose shell blocks TestREADMECommands runs,
// in order: the front page's set-up and tour, then the command reference.
var commandPages = []string{"README.md", "docs/cli.md"}

// readmeCommands returns the command lines of the ```sh blocks of
// commandPages, continuation lines joined and comments dropped.
func readmeCommands(t *testing.T) []string {
	var cmds []string
	for _, page := range commandPages {
		cmds = append(cmds, pageCommands(t, page)...)
	}
	return cmds
}

// pageCommands returns the command lines of one page's ```sh blocks.
func pageCommands(t *testing.T, page string) []string {
	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	in, cont := false, ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```"):
			in = !in && strings.TrimPrefix(line, "```") == "sh"
			continue
		case !in:
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cont += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		if strings.Count(cont+line, "'")%2 == 1 {
			cont += line + "\n" // inside a quoted argument
			continue
		}
		line = cont + line
		cont = ""
		if i := strings.Index(line, "  #"); i >= 0 {
			line = line[:i]
		}
		if line = strings.TrimSpace(line); line != "" {
			cmds = append(cmds, line)
		}
	}
	return cmds
}

// TestREADMECommands runs, in order and as written, every command of the
// shell blocks of the README and docs/cli.md (commandPages) that needs
// neither the network nor minutes, with
// bin/lfmq built from this tree, in a fresh directory that has the
// repository's testdata: the README shows commands that work, and the
// outputs it shows for them (readmeOutputs) are theirs.
func TestREADMECommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	work := t.TempDir()
	bin := filepath.Join(work, "bin", "lfmq")
	build := exec.Command(goCmd, "build", "-o", bin, "./cmd/lfmq")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	testdata, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(testdata, filepath.Join(work, "testdata")); err != nil {
		t.Fatal(err)
	}
	ran, shown, served := 0, 0, false
	cmds := readmeCommands(t)
	for i := 0; i < len(cmds); i++ {
		cmd := cmds[i]
		switch {
		case strings.HasPrefix(cmd, tourReleaseBuild):
			// The tour's release, its runtime the binary just built
			// rather than one compiled from a source archive (minutes).
			buildTourRelease(t, work, bin, cmd)
			ran++
			continue
		case strings.HasPrefix(cmd, tourLaunch) && strings.HasSuffix(cmd, "&"):
			// The tour's server, with the commands after it that ask it
			// (up to the next that is not curl), as pasted into one shell.
			j := i + 1
			for j < len(cmds) && (strings.HasPrefix(cmds[j], "curl ") || strings.HasPrefix(cmds[j], "until curl ")) {
				j++
			}
			runTourServer(t, work, cmds[i:j])
			ran, served = ran+j-i, true
			i = j - 1
			continue
		}
		if why := readmeSkip(cmd); why != "" {
			t.Logf("skipped (%s): %s", why, cmd)
			continue
		}
		sh := exec.Command("bash", "-c", strings.Replace(cmd, "lfmq ", bin+" ", 1))
		if strings.HasPrefix(cmd, "bin/lfmq ") {
			sh = exec.Command("bash", "-c", cmd)
		}
		sh.Dir = work
		out, err := sh.CombinedOutput()
		if err != nil {
			t.Errorf("documented command failed: %s\n%v\n%s", cmd, err, out)
			continue
		}
		ran++
		for prefix, marker := range readmeOutputs {
			if strings.HasPrefix(cmd, prefix) {
				checkOutput(t, cmd, readmeBlock(t, marker), string(out))
				shown++
			}
		}
	}
	if !served {
		t.Errorf("the README's tour has no %q… & to run", tourLaunch)
	}
	if shown != len(readmeOutputs) {
		t.Errorf("%d of the README's %d example outputs were checked: a command or its block changed", shown, len(readmeOutputs))
	}
	// The tour alone has five; fewer means the README or this test lost them.
	if ran < 4 {
		t.Errorf("only %d documented commands ran", ran)
	}
}

// The starts of the tour's release build and of its launch in the
// background, which TestREADMECommands runs its own way.
const (
	tourReleaseBuild = "bin/lfmq release build --checkpoint tour/"
	tourLaunch       = "bin/lfmq launch --release-dir tour/"
)

// buildTourRelease builds the release the README's release build command
// describes, with bundle.Build as lfmq release build calls it, except that
// the runtime for this platform is bin (built from this tree) and the
// source archive a minimal module's: compiling the runtime from the
// archive takes minutes.
func buildTourRelease(t *testing.T, work, bin, cmd string) {
	t.Helper()
	flags := map[string]string{}
	args := strings.TrimPrefix(cmd, "bin/lfmq release build ")
	flag := regexp.MustCompile(`^\s*(--[a-z-]+) ("[^"]*"|[^\s"]+)`)
	for strings.TrimSpace(args) != "" {
		m := flag.FindStringSubmatch(args)
		if m == nil {
			t.Fatalf("the README's release build: %q is not a flag and its value: %s", args, cmd)
		}
		flags[m[1]] = m[2]
		args = args[len(m[0]):]
	}
	path := func(flag string) string {
		if flags[flag] == "" {
			return ""
		}
		return filepath.Join(work, flags[flag])
	}
	host := bundle.Platform{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH}
	opts := bundle.Options{
		CheckpointDir: path("--checkpoint"), OutDir: path("--out"), EvidenceDir: path("--evidence"),
		LicenseFile: path("--license"), BaseModel: flags["--base-model"], HubRepo: flags["--hub-repo"],
		License:  card.License{ID: flags["--license-id"], Name: flags["--license-name"], Link: flags["--license-link"]},
		Revision: "v1", Platforms: []bundle.Platform{host}, SourceDir: bundletest.Source(t), Version: "0.0.0-readme",
		Quality: bundle.RenderQuality,
		BuildBinary: func(_ context.Context, p bundle.Platform, _, _, out string) error {
			data, err := os.ReadFile(bin)
			if err != nil {
				return err
			}
			return os.WriteFile(out, data, 0o755)
		},
	}
	for f := range flags {
		switch f {
		case "--checkpoint", "--out", "--evidence", "--license", "--base-model", "--hub-repo", "--license-id", "--license-name", "--license-link", "--platforms":
		default:
			t.Fatalf("the README's release build has %s, which buildTourRelease does not pass on", f)
		}
	}
	if _, err := bundle.Build(context.Background(), opts); err != nil {
		t.Fatalf("the README's release build: %v", err)
	}
}

// runTourServer runs the README's launch in the background and the
// commands after it that ask the server, in one shell as a reader pastes
// them, on a free port instead of 8000; the server is stopped at the end.
// The last command's answer must be a chat completion.
func runTourServer(t *testing.T, work string, cmds []string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	script := "set -e\n" + cmds[0] + "\npid=$!\ntrap 'kill $pid 2>/dev/null; wait $pid' EXIT\n" + strings.Join(cmds[1:], "\n") + "\n"
	script = strings.NewReplacer(":8000", ":"+port, "--port 8000", "--port "+port).Replace(script)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sh := exec.CommandContext(ctx, "bash", "-c", script)
	sh.Dir, sh.WaitDelay = work, 10*time.Second
	out, err := sh.CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"finish_reason"`) {
		t.Errorf("the README's server commands, pasted into one shell, failed: %v\n%s\n%s", err, strings.Join(cmds, "\n"), out)
	}
}

// readmeOutputs maps the start of a README command to a line of the
// README's plain ``` block that shows that command's output.
var readmeOutputs = map[string]string{
	"bin/lfmq quantize --model testdata/tiny-lfm2-moe/model --out tour/rtn --method rtn": "wrote lfmq-1 checkpoint tour/rtn",
	"bin/lfmq generate --model tour/rtn ":                                                "model tour/rtn (lfmq-1), loaded in",
}

// readmeBlock returns the lines of the README's plain ``` block that has
// a line containing marker.
func readmeBlock(t *testing.T, marker string) []string {
	t.Helper()
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var block []string
	// fence is the opening line of the block the scan is in ("" outside
	// any): a block opened by "```sh" is closed by the next "```" too, but
	// only a plain one shows output.
	fence, found := "", false
	for line := range strings.SplitSeq(string(data), "\n") {
		switch {
		case fence == "" && strings.HasPrefix(line, "```"):
			fence, block, found = line, nil, false
		case fence != "" && line == "```":
			if fence == "```" && found {
				return block
			}
			fence = ""
		case fence == "```":
			block = append(block, line)
			found = found || strings.Contains(line, marker)
		}
	}
	t.Fatalf("the README has no plain ``` block with a line containing %q", marker)
	return nil
}

// readmeWild is what a README output line may show in place of a run's
// own value: "…" for anything, and times and rates, which vary by run.
var readmeWild = regexp.MustCompile(`…|[0-9]+(\.[0-9]+)? tokens/s|[0-9]+(\.[0-9]+)?(ns|µs|ms|s)\b`)

// checkOutput compares the README's output block with the last lines of a
// command's output (status lines may come before), byte for byte except
// for readmeWild's values.
func checkOutput(t *testing.T, cmd string, block []string, out string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) < len(block) {
		t.Errorf("README shows %d lines of output for %s; it printed %d:\n%s", len(block), cmd, len(lines), out)
		return
	}
	lines = lines[len(lines)-len(block):]
	for i, want := range block {
		var re strings.Builder
		re.WriteString("^")
		rest := want
		for {
			loc := readmeWild.FindStringIndex(rest)
			if loc == nil {
				re.WriteString(regexp.QuoteMeta(rest))
				break
			}
			re.WriteString(regexp.QuoteMeta(rest[:loc[0]]))
			switch m := rest[loc[0]:loc[1]]; {
			case m == "…":
				re.WriteString(".+")
			case strings.HasSuffix(m, "tokens/s"):
				re.WriteString(`[0-9]+(\.[0-9]+)? tokens/s`)
			default:
				re.WriteString(`[0-9]+(\.[0-9]+)?(ns|µs|ms|s)`)
			}
			rest = rest[loc[1]:]
		}
		re.WriteString("$")
		if !regexp.MustCompile(re.String()).MatchString(lines[i]) {
			t.Errorf("README's output of %s, line %d:\n README %q\n actual %q", cmd, i+1, want, lines[i])
		}
	}
}

// TestREADMEFixtureFigures: what the README says of the test model (its
// parameter count, layers, experts and width) is what its files hold.
func TestREADMEFixtureFigures(t *testing.T) {
	const model = "testdata/tiny-lfm2-moe/model"
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := strings.Join(strings.Fields(string(data)), " ")

	f, err := os.Open(filepath.Join(model, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var n uint64
	if err := binary.Read(f, binary.LittleEndian, &n); err != nil || n > 1<<24 {
		t.Fatalf("safetensors header length %d: %v", n, err)
	}
	header := make([]byte, n)
	if _, err := io.ReadFull(f, header); err != nil {
		t.Fatal(err)
	}
	var tensors map[string]json.RawMessage
	if err := json.Unmarshal(header, &tensors); err != nil {
		t.Fatal(err)
	}
	params := 0
	for name, raw := range tensors {
		if name == "__metadata__" {
			continue
		}
		var info struct{ Shape []int }
		if err := json.Unmarshal(raw, &info); err != nil {
			t.Fatal(err)
		}
		p := 1
		for _, d := range info.Shape {
			p *= d
		}
		params += p
	}
	var cfg struct {
		Layers  int `json:"num_hidden_layers"`
		Experts int `json:"num_experts"`
		Hidden  int `json:"hidden_size"`
	}
	raw, err := os.ReadFile(filepath.Join(model, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		fmt.Sprintf("%.2f M parameter test model", float64(params)/1e6),
		fmt.Sprintf("(%d layers, %d experts, hidden %d, BF16)", cfg.Layers, cfg.Experts, cfg.Hidden),
	} {
		if !strings.Contains(readme, want) {
			t.Errorf("the README does not say %q", want)
		}
	}
}

// readmeScoreEvidence is the evidence file the README's score table is
// rendered from: make demo DEMO_RECORDS=0's demo-out/evidence/score-tiny.json.
const readmeScoreEvidence = "docs/evidence/score-tiny.json"

// TestREADMEScoreTable: the score table of the README (and its copy in
// docs/scoring.md) is the pooled ("all") rows of the table lfmq score
// prints (report.Markdown) for the committed evidence file, byte for byte,
// and the token count stated above it is the file's, so the figures shown
// are measured ones and cannot drift from their evidence.
func TestREADMEScoreTable(t *testing.T) {
	f, err := evidence.Read(readmeScoreEvidence)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i, line := range strings.Split(strings.TrimRight(report.Markdown(f), "\n"), "\n") {
		if line == "" {
			break // the end of the main table
		}
		if i < 2 || slices.Contains(strings.Split(line, " | "), evidence.AllCorpora) {
			want = append(want, line)
		}
	}
	if len(want) < 3 {
		t.Fatalf("%s renders no pooled rows:\n%s", readmeScoreEvidence, report.Markdown(f))
	}
	tokens := 0
	for _, r := range f.Results {
		if r.Corpus == evidence.AllCorpora {
			tokens = r.Tokens
			break
		}
	}
	for _, doc := range []string{"README.md", "docs/scoring.md"} {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		start := slices.Index(lines, want[0])
		if start < 0 {
			t.Errorf("%s has no table headed %q (rendered from %s)", doc, want[0], readmeScoreEvidence)
			continue
		}
		got := lines[start:]
		if end := slices.IndexFunc(got, func(l string) bool { return !strings.HasPrefix(l, "|") }); end >= 0 {
			got = got[:end]
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s's score table differs from %s rendered by report.Markdown:\n%s:\n%s\nrendered:\n%s",
				doc, readmeScoreEvidence, doc, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if s := fmt.Sprintf("%s scored tokens", thousands(tokens)); !strings.Contains(strings.Join(strings.Fields(string(data)), " "), s) {
			t.Errorf("%s does not say %q, the evidence file's total", doc, s)
		}
	}
}

// thousands writes n with comma separators, as the README does.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// TestREADMEOutputsIgnored: what the README's commands write into the
// clone (--out, --plot and the like with a relative path, such as the
// tour's tour/rtn) lies in a directory .gitignore names, so that a reader
// who follows them is not left with untracked files in git status.
func TestREADMEOutputsIgnored(t *testing.T) {
	data, err := os.ReadFile(".gitignore")
	if err != nil {
		t.Fatal(err)
	}
	ignored := map[string]bool{}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "/") && strings.HasSuffix(l, "/") {
			ignored[strings.Trim(l, "/")] = true
		}
	}
	out := regexp.MustCompile(`--(?:out|plot|save-reference|cache-root|cache-dir) ([^\s/~$][^\s]*)`)
	checked := 0
	for _, cmd := range readmeCommands(t) {
		if !strings.HasPrefix(cmd, "bin/lfmq ") {
			continue
		}
		for _, m := range out.FindAllStringSubmatch(cmd, -1) {
			top, _, _ := strings.Cut(filepath.ToSlash(filepath.Clean(m[1])), "/")
			checked++
			if !ignored[top] {
				t.Errorf("README command writes %s, under /%s/, which .gitignore does not name: %s", m[1], top, cmd)
			}
		}
	}
	if checked == 0 {
		t.Fatal("found no output path in the README's commands")
	}
}
