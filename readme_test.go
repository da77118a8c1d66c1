package lfmq_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeSkip says why a README command is not run by TestREADMECommands,
// or "" to run it. Those skipped need the network or a hub account, run
// for minutes (make demo and make test are CI's own steps), start a server
// in the background, or name files the reader substitutes (placeholders,
// a home directory) or that make demo writes.
func readmeSkip(cmd string) string {
	switch {
	case strings.HasPrefix(cmd, "make "):
		return "a make target (CI runs make test; make demo takes minutes)"
	case strings.Contains(cmd, "://"), strings.Contains(cmd, "HF_TOKEN"), strings.Contains(cmd, "--cache-root"):
		return "needs the network or a hub"
	case strings.HasSuffix(cmd, "&"), strings.HasPrefix(cmd, "curl "):
		return "a server in the background"
	case strings.Contains(cmd, "~/"), regexp.MustCompile(`<[a-z ]+>`).MatchString(cmd):
		return "names the reader's own files"
	case strings.Contains(cmd, "demo-out/"):
		return "uses make demo's output"
	case !strings.HasPrefix(cmd, "bin/lfmq ") && !strings.HasPrefix(cmd, "lfmq "):
		return "not an lfmq command"
	}
	return ""
}

// readmeCommands returns the command lines of the README's ```sh blocks,
// continuation lines joined and comments dropped.
func readmeCommands(t *testing.T) []string {
	data, err := os.ReadFile("README.md")
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
// README's shell blocks that needs neither the network nor minutes, with
// bin/lfmq built from this tree, in a fresh directory that has the
// repository's testdata: the README shows commands that work.
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
	ran := 0
	for _, cmd := range readmeCommands(t) {
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
			t.Errorf("README command failed: %s\n%v\n%s", cmd, err, out)
			continue
		}
		ran++
	}
	// The tour alone has five; fewer means the README or this test lost them.
	if ran < 4 {
		t.Errorf("only %d README commands ran", ran)
	}
}
