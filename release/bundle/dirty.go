package bundle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// DirtyError refuses a runtime source tree whose archived files differ
// from the git commit checked out there (as goreleaser refuses a dirty
// tree): a release must be reproducible from a commit, or say that it is
// not (Options.AllowDirty).
type DirtyError struct {
	Dir string
	// Files are the differing paths, relative to Dir, sorted.
	Files []string
}

func (e *DirtyError) Error() string {
	shown := e.Files
	more := ""
	if len(shown) > 5 {
		shown, more = shown[:5], fmt.Sprintf(" and %d more", len(e.Files)-5)
	}
	return fmt.Sprintf("bundle: the runtime source %s has uncommitted changes in files the source archive carries (%s%s): commit them, or pass --allow-dirty to build from them anyway (recorded in runtime-release.json and the model card)",
		e.Dir, strings.Join(shown, ", "), more)
}

// UncommittedFiles returns the files of the source archive of the module at
// root (SourceFiles) that differ from the git commit checked out there:
// modified (staged or not), added, untracked or ignored files the archive
// would carry, and deleted tracked files it would have carried; sorted,
// relative to root. versioned is false when root is in no git work tree,
// such as an extracted source archive: there is no commit to differ from.
func UncommittedFiles(ctx context.Context, root string) (files []string, versioned bool, err error) {
	if _, err := exec.LookPath("git"); err != nil {
		if dir, ok := gitDir(root); ok {
			return nil, false, &InputError{Path: root, Msg: fmt.Sprintf("is in the git work tree of %s, and git is not installed to check it for uncommitted changes; install git, or pass --allow-dirty", dir), Option: true}
		}
		return nil, false, nil
	}
	prefix, err := git(ctx, root, "rev-parse", "--show-prefix")
	if err != nil {
		if _, ok := gitDir(root); !ok {
			return nil, false, nil
		}
		return nil, false, err
	}
	status, err := git(ctx, root, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignored=traditional", "--", ".")
	if err != nil {
		return nil, true, err
	}
	archived, err := SourceFiles(root)
	if err != nil {
		return nil, true, err
	}
	inArchive := map[string]bool{}
	for _, f := range archived {
		inArchive[f.Path] = true
	}
	prefix = strings.TrimSpace(prefix)
	seen := map[string]bool{}
	entries := strings.Split(status, "\x00")
	for i := 0; i < len(entries); i++ {
		e := entries[i]
		if len(e) < 4 {
			continue
		}
		xy, p := e[:2], e[3:]
		if xy[0] == 'R' || xy[0] == 'C' {
			// A rename or copy: the next entry is the old path, which
			// the archive would carry as it was, if at all.
			if i+1 < len(entries) {
				if old, ok := strings.CutPrefix(entries[i+1], prefix); ok && archivable(old) {
					seen[old] = true
				}
			}
			i++
		}
		rel, ok := strings.CutPrefix(p, prefix)
		if !ok {
			continue
		}
		deleted := xy[0] == 'D' || xy[1] == 'D'
		if inArchive[rel] || deleted && archivable(rel) {
			seen[rel] = true
		}
	}
	for p := range seen {
		files = append(files, p)
	}
	slices.Sort(files)
	return files, true, nil
}

// archivable reports whether a path that no longer exists would be one
// of the source archive's files: a non-test Go, assembly or header file
// outside the directories SourceFiles skips, or one of the root's files.
func archivable(rel string) bool {
	dir, name := path.Split(rel)
	if dir == "" {
		if slices.Contains(rootFiles, name) {
			return true
		}
		for _, p := range rootPrefixes {
			if strings.HasPrefix(name, p) {
				return true
			}
		}
	}
	for seg := range strings.SplitSeq(strings.TrimSuffix(dir, "/"), "/") {
		if seg != "" && (seg[0] == '.' || seg[0] == '_' || seg == "testdata" || seg == "vendor") {
			return false
		}
	}
	switch path.Ext(name) {
	case ".go":
		return !strings.HasSuffix(name, "_test.go")
	case ".s", ".h":
		return true
	}
	return false
}

// gitDir returns the nearest directory at or above dir that holds .git.
func gitDir(dir string) (string, bool) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", false
	}
	for d := abs; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d, true
		}
		if filepath.Dir(d) == d {
			return "", false
		}
	}
}

// git runs git in dir and returns its standard output.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	// No index refresh written behind the user's back.
	cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("bundle: git %s in %s: %s", strings.Join(args, " "), dir, strings.TrimSpace(stderr.String()))
		}
		return "", fmt.Errorf("bundle: git: %w", err)
	}
	return stdout.String(), nil
}
