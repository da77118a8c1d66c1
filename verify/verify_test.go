package verify_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lfmq/lfmq/format/canonjson"
	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/release/bundle"
	"github.com/lfmq/lfmq/release/bundle/bundletest"
	"github.com/lfmq/lfmq/verify"
	"github.com/lfmq/lfmq/verify/sums"
)

var (
	releaseOnce sync.Once
	releaseDir  string
	// benchDir is the generated release of the benchmarks, removed by
	// TestMain.
	benchDir string
)

// release returns a built test release, shared by the tests (read-only:
// tests that damage it work on a copy).
func release(t *testing.T) string {
	releaseOnce.Do(func() {
		dir, err := os.MkdirTemp("", "lfmq-verify-test-")
		if err != nil {
			t.Fatal(err)
		}
		releaseDir = filepath.Join(dir, "release")
		src := bundletest.Release(t, nil)
		bundletest.CopyDir(t, src, releaseDir)
	})
	if releaseDir == "" {
		t.Fatal("no test release")
	}
	return releaseDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, dir := range []string{releaseDir, benchDir} {
		if dir != "" {
			os.RemoveAll(filepath.Dir(dir))
		}
	}
	os.Exit(code)
}

func copyRelease(t *testing.T) string {
	dst := filepath.Join(t.TempDir(), "r")
	bundletest.CopyDir(t, release(t), dst)
	return dst
}

func run(t *testing.T, dir string, deep bool) *verify.Report {
	t.Helper()
	rep, err := verify.Release(context.Background(), dir, verify.Options{Deep: deep})
	if err != nil {
		t.Fatalf("operational error: %v", err)
	}
	return rep
}

func has(rep *verify.Report, path string, kind verify.Kind) bool {
	for _, f := range rep.Findings {
		if f.Path == path && f.Kind == kind {
			return true
		}
	}
	return false
}

func dump(rep *verify.Report) string {
	var b strings.Builder
	for _, f := range rep.Findings {
		b.WriteString(f.Error() + "\n")
	}
	return b.String()
}

func TestCleanRelease(t *testing.T) {
	dir := release(t)
	for _, deep := range []bool{false, true} {
		rep := run(t, dir, deep)
		if !rep.OK || rep.Err() != nil || len(rep.Findings) != 0 || len(rep.Refetch) != 0 {
			t.Fatalf("deep=%v: findings:\n%s", deep, dump(rep))
		}
		if rep.ReleaseID != "tiny-lfm2-moe-lfmq1-v1" || rep.ManifestSHA256 == "" {
			t.Errorf("report %+v", rep)
		}
		data, _ := os.ReadFile(filepath.Join(dir, sums.SumsFile))
		sum := sha256.Sum256(data)
		if rep.Digest != hex.EncodeToString(sum[:]) {
			t.Errorf("digest %s", rep.Digest)
		}
		entries, _ := sums.Parse(sums.SumsFile, data, sums.BundlePath)
		if rep.Files != len(entries) {
			t.Errorf("hashed %d files, the list has %d", rep.Files, len(entries))
		}
	}
	// Worker count does not change the report.
	one, _ := verify.Release(context.Background(), dir, verify.Options{Workers: 1})
	if one.Files != run(t, dir, false).Files || !one.OK {
		t.Error("Workers: 1 differs")
	}
}

// TestTamper damages every file of a release in turn, in every way, and
// checks the finding, its error and the re-fetch list.
func TestTamper(t *testing.T) {
	base := release(t)
	data, err := os.ReadFile(filepath.Join(base, sums.SumsFile))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := sums.Parse(sums.SumsFile, data, sums.BundlePath)
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{sums.SumsFile}
	for _, e := range entries {
		paths = append(paths, e.Path)
	}
	if len(paths) < 25 {
		t.Fatalf("only %d files in the test release", len(paths))
	}
	type damage struct {
		name string
		do   func(t *testing.T, p string)
		// want checks the report for the damaged path.
		want func(rep *verify.Report, path string) bool
	}
	listed := func(rep *verify.Report, path string) bool { return slices.Contains(rep.Refetch, path) }
	damages := []damage{
		{"flip", func(t *testing.T, p string) {
			b, _ := os.ReadFile(p)
			b[len(b)/2] ^= 0x01
			os.WriteFile(p, b, 0o644)
		}, func(rep *verify.Report, path string) bool {
			if path == sums.SumsFile {
				// A flipped list is malformed, or now names another
				// digest or path: some finding, never a clean report.
				return len(rep.Findings) > 0
			}
			return has(rep, path, verify.KindHash) && listed(rep, path)
		}},
		{"truncate", func(t *testing.T, p string) {
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)/2], 0o644)
		}, func(rep *verify.Report, path string) bool {
			switch path {
			case sums.SumsFile:
				return has(rep, path, verify.KindMalformed) && listed(rep, path)
			case sums.RuntimeReleaseFile:
				// SHA256SUMS gives no size: hashed, and malformed.
				return has(rep, path, verify.KindHash) && has(rep, path, verify.KindMalformed) && listed(rep, path)
			}
			return has(rep, path, verify.KindSize) && listed(rep, path)
		}},
		{"delete", func(t *testing.T, p string) {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}, func(rep *verify.Report, path string) bool {
			return has(rep, path, verify.KindMissing) && listed(rep, path)
		}},
	}
	for _, path := range paths {
		for _, d := range damages {
			t.Run(d.name+"/"+path, func(t *testing.T) {
				dir := copyRelease(t)
				d.do(t, filepath.Join(dir, filepath.FromSlash(path)))
				rep := run(t, dir, false)
				if rep.OK || rep.Err() == nil {
					t.Fatal("damage not detected")
				}
				if !d.want(rep, path) {
					t.Errorf("report for %s:\n%s\nre-fetch %v", path, dump(rep), rep.Refetch)
				}
				var me *verify.MismatchError
				if !errors.As(rep.Err(), &me) {
					t.Error("errors.As(*MismatchError) fails")
				}
				if d.name == "delete" && !errors.Is(rep.Err(), verify.ErrMissing) {
					t.Error("errors.Is(ErrMissing) fails")
				}
				for _, f := range rep.Findings {
					if f.Kind == verify.KindHash && (f.WantSHA256 == "" || f.GotSHA256 == "" || f.WantSHA256 == f.GotSHA256) {
						t.Errorf("hash finding without both digests: %+v", f)
					}
					if f.Kind == verify.KindSize && (f.WantSize < 0 || f.GotSize < 0 || f.WantSize == f.GotSize) {
						t.Errorf("size finding without both sizes: %+v", f)
					}
				}
			})
		}
	}
	t.Run("extra", func(t *testing.T) {
		dir := copyRelease(t)
		os.WriteFile(filepath.Join(dir, "new.txt"), []byte("x"), 0o644)
		os.WriteFile(filepath.Join(dir, "checkpoint", "new.safetensors"), []byte("y"), 0o644)
		// Hub clones and local-dir downloads keep these; they are ignored.
		os.MkdirAll(filepath.Join(dir, ".git", "objects"), 0o755)
		os.WriteFile(filepath.Join(dir, ".git", "HEAD"), []byte("ref"), 0o644)
		os.MkdirAll(filepath.Join(dir, ".cache", "huggingface"), 0o755)
		os.WriteFile(filepath.Join(dir, ".cache", "huggingface", "x.lock"), nil, 0o644)
		rep := run(t, dir, false)
		if !has(rep, "new.txt", verify.KindExtra) || !has(rep, "checkpoint/new.safetensors", verify.KindExtra) || len(rep.Findings) != 2 {
			t.Errorf("findings:\n%s", dump(rep))
		}
		if len(rep.Refetch) != 0 {
			t.Errorf("re-fetch %v for extra files", rep.Refetch)
		}
		if !errors.Is(rep.Err(), verify.ErrExtra) {
			t.Error("errors.Is(ErrExtra) fails")
		}
	})
}

func TestUnsafeEntries(t *testing.T) {
	t.Run("symlink to a file outside", func(t *testing.T) {
		dir := copyRelease(t)
		outside := filepath.Join(t.TempDir(), "secret")
		os.WriteFile(outside, []byte("secret"), 0o644)
		p := filepath.Join(dir, "checkpoint", "config.json")
		os.Remove(p)
		if err := os.Symlink(outside, p); err != nil {
			t.Skip(err)
		}
		rep := run(t, dir, true)
		if !has(rep, "checkpoint/config.json", verify.KindUnsafe) || !slices.Contains(rep.Refetch, "checkpoint/config.json") {
			t.Errorf("findings:\n%s", dump(rep))
		}
		if !errors.Is(rep.Err(), verify.ErrUnsafePath) {
			t.Error("errors.Is(ErrUnsafePath) fails")
		}
	})
	t.Run("symlinked directory", func(t *testing.T) {
		dir := copyRelease(t)
		if err := os.Symlink("/", filepath.Join(dir, "evidence")); err != nil {
			t.Skip(err)
		}
		rep := run(t, dir, false)
		if !has(rep, "evidence", verify.KindUnsafe) {
			t.Errorf("findings:\n%s", dump(rep))
		}
	})
	t.Run("symlink inside", func(t *testing.T) {
		dir := copyRelease(t)
		if err := os.Symlink("LICENSE", filepath.Join(dir, "LICENSE2")); err != nil {
			t.Skip(err)
		}
		rep := run(t, dir, false)
		if !has(rep, "LICENSE2", verify.KindUnsafe) {
			t.Errorf("a link inside the release was accepted:\n%s", dump(rep))
		}
	})
	for _, bad := range []string{"../outside", "/etc/passwd", "a/../../b", `a\b`} {
		t.Run("list entry "+bad, func(t *testing.T) {
			dir := copyRelease(t)
			p := filepath.Join(dir, sums.SumsFile)
			b, _ := os.ReadFile(p)
			line := strings.Repeat("0", 64) + "  " + bad + "\n"
			os.WriteFile(p, append([]byte(line), b...), 0o644)
			rep := run(t, dir, false)
			if !has(rep, sums.SumsFile, verify.KindUnsafe) {
				t.Errorf("findings:\n%s", dump(rep))
			}
			if !errors.Is(rep.Err(), verify.ErrUnsafePath) {
				t.Error("errors.Is(ErrUnsafePath) fails")
			}
		})
	}
}

// resign rewrites runtime-release.json's file list and SHA256SUMS for the
// files as they are now, as a forger would.
func resign(t *testing.T, dir string, edit func(*sums.RuntimeRelease)) {
	t.Helper()
	rrPath := filepath.Join(dir, sums.RuntimeReleaseFile)
	data, _ := os.ReadFile(rrPath)
	var rr sums.RuntimeRelease
	if err := json.Unmarshal(data, &rr); err != nil {
		t.Fatal(err)
	}
	resignEdit(t, dir, &rr, edit)
}

func slicesSortFiles(fs []sums.File) {
	slices.SortFunc(fs, func(a, b sums.File) int { return strings.Compare(a.Path, b.Path) })
}

func resignWith(t testing.TB, dir string, rr *sums.RuntimeRelease) { resignEdit(t, dir, rr, nil) }

// resignEdit rehashes rr's files as they are on disk, applies edit and
// writes runtime-release.json and SHA256SUMS.
func resignEdit(t testing.TB, dir string, rr *sums.RuntimeRelease, edit func(*sums.RuntimeRelease)) {
	t.Helper()
	rrPath := filepath.Join(dir, sums.RuntimeReleaseFile)
	for i, f := range rr.Files {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f.Path)))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		rr.Files[i] = sums.File{Path: f.Path, Size: int64(len(b)), SHA256: hex.EncodeToString(sum[:])}
	}
	if edit != nil {
		edit(rr)
	}
	out, err := canonjson.Marshal(rr)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(rrPath, out, 0o644)
	sum := sha256.Sum256(out)
	entries := []sums.Entry{{Path: sums.RuntimeReleaseFile, SHA256: hex.EncodeToString(sum[:])}}
	for _, f := range rr.Files {
		entries = append(entries, sums.Entry{Path: f.Path, SHA256: f.SHA256})
	}
	list, err := sums.Format(entries, sums.BundlePath)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, sums.SumsFile), list, 0o644)
}

func TestPinsAndManifest(t *testing.T) {
	t.Run("manifest pin", func(t *testing.T) {
		dir := copyRelease(t)
		resign(t, dir, func(rr *sums.RuntimeRelease) { rr.Checkpoint.ManifestSHA256 = strings.Repeat("a", 64) })
		rep := run(t, dir, false)
		if !has(rep, sums.ManifestPath, verify.KindPin) {
			t.Errorf("findings:\n%s", dump(rep))
		}
	})
	t.Run("resigned file the manifest disowns", func(t *testing.T) {
		dir := copyRelease(t)
		p := filepath.Join(dir, "checkpoint", "layer-03.safetensors")
		b, _ := os.ReadFile(p)
		b[len(b)-1] ^= 0xff
		os.WriteFile(p, b, 0o644)
		resign(t, dir, func(rr *sums.RuntimeRelease) {})
		rep := run(t, dir, true)
		if !has(rep, "checkpoint/layer-03.safetensors", verify.KindDisagree) || !has(rep, "checkpoint/layer-03.safetensors", verify.KindTensor) {
			t.Errorf("findings:\n%s", dump(rep))
		}
		if has(rep, "checkpoint/layer-03.safetensors", verify.KindHash) {
			t.Error("the forged lists should agree with the file")
		}
	})
	t.Run("lists disagree", func(t *testing.T) {
		dir := copyRelease(t)
		p := filepath.Join(dir, sums.SumsFile)
		b, _ := os.ReadFile(p)
		// Drop README.md's line from SHA256SUMS only.
		var keep []string
		for _, l := range strings.SplitAfter(string(b), "\n") {
			if !strings.HasSuffix(l, "  README.md\n") {
				keep = append(keep, l)
			}
		}
		os.WriteFile(p, []byte(strings.Join(keep, "")), 0o644)
		rep := run(t, dir, false)
		if !has(rep, "README.md", verify.KindDisagree) {
			t.Errorf("findings:\n%s", dump(rep))
		}
	})
	t.Run("deep finds the tensor", func(t *testing.T) {
		dir := copyRelease(t)
		ck, err := lfmq1.Open(filepath.Join(dir, "checkpoint"), lfmq1.CheckStructure)
		if err != nil {
			t.Fatal(err)
		}
		ck.Close()
		p := filepath.Join(dir, "checkpoint", "experts-05.safetensors")
		b, _ := os.ReadFile(p)
		b[len(b)-10] ^= 0x10
		os.WriteFile(p, b, 0o644)
		shallow := run(t, dir, false)
		deep := run(t, dir, true)
		if shallow.Count(verify.KindTensor) != 0 || deep.Count(verify.KindTensor) != 1 {
			t.Fatalf("shallow:\n%s\ndeep:\n%s", dump(shallow), dump(deep))
		}
		for _, f := range deep.Findings {
			if f.Kind == verify.KindTensor && !strings.Contains(f.Detail, "model.layers.5.feed_forward.experts.") {
				t.Errorf("tensor finding %+v", f)
			}
		}
	})
}

func TestReportJSON(t *testing.T) {
	dir := copyRelease(t)
	os.Remove(filepath.Join(dir, "LICENSE"))
	rep := run(t, dir, false)
	data, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		OK       bool
		Refetch  []string
		Findings []map[string]any
	}
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.OK || len(back.Findings) != 1 || !slices.Equal(back.Refetch, []string{"LICENSE"}) {
		t.Fatalf("%s", data)
	}
	f := back.Findings[0]
	for _, k := range []string{"kind", "path", "expected_sha256", "actual_sha256", "expected_size", "actual_size", "authority"} {
		if _, ok := f[k]; !ok {
			t.Errorf("finding lacks %q: %s", k, data)
		}
	}
	if f["kind"] != "missing" || f["actual_sha256"] != nil || f["expected_size"] == nil {
		t.Errorf("finding %v", f)
	}
}

func TestSums(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(data), 0o644)
		sum := sha256.Sum256([]byte(data))
		return hex.EncodeToString(sum[:])
	}
	a := write("a.txt", "alpha")
	b := write("sub dir/b.txt", "beta")
	list := a + "  a.txt\n" + b + " *sub dir/b.txt\n"
	os.WriteFile(filepath.Join(dir, "SUMS"), []byte(list), 0o644)
	rep, err := verify.Sums(context.Background(), filepath.Join(dir, "SUMS"), verify.Options{})
	if err != nil || !rep.OK || rep.Files != 2 {
		t.Fatalf("clean list: %v %s", err, dump(rep))
	}
	// A link inside the directory is followed, like sha256sum does.
	if err := os.Symlink("a.txt", filepath.Join(dir, "link")); err == nil {
		os.WriteFile(filepath.Join(dir, "SUMS"), []byte(list+a+"  link\n"), 0o644)
		rep, _ = verify.Sums(context.Background(), filepath.Join(dir, "SUMS"), verify.Options{})
		if !rep.OK {
			t.Errorf("link inside: %s", dump(rep))
		}
	}
	outside := filepath.Join(t.TempDir(), "o")
	os.WriteFile(outside, []byte("alpha"), 0o644)
	os.Symlink(outside, filepath.Join(dir, "escape"))
	write("a.txt", "ALPHA")
	os.WriteFile(filepath.Join(dir, "SUMS"), []byte(list+a+"  missing.txt\n"+a+"  escape\n"), 0o644)
	rep, err = verify.Sums(context.Background(), filepath.Join(dir, "SUMS"), verify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !has(rep, "a.txt", verify.KindHash) || !has(rep, "missing.txt", verify.KindMissing) || !has(rep, "escape", verify.KindUnsafe) || len(rep.Findings) != 3 {
		t.Errorf("findings:\n%s", dump(rep))
	}
	if !slices.Equal(rep.Refetch, []string{"a.txt", "missing.txt"}) {
		t.Errorf("re-fetch %v", rep.Refetch)
	}
	os.WriteFile(filepath.Join(dir, "SUMS"), []byte(a+"  ../a.txt\n"), 0o644)
	rep, _ = verify.Sums(context.Background(), filepath.Join(dir, "SUMS"), verify.Options{})
	if !has(rep, "SUMS", verify.KindUnsafe) {
		t.Errorf("traversal: %s", dump(rep))
	}
}

// TestProgress checks that a progress sink sees every byte hashed.
func TestProgress(t *testing.T) {
	var p countProgress
	rep, err := verify.Release(context.Background(), release(t), verify.Options{Progress: &p})
	if err != nil {
		t.Fatal(err)
	}
	if p.total != rep.Bytes || p.n.Load() != rep.Bytes {
		t.Errorf("progress total %d added %d, hashed %d", p.total, p.n.Load(), rep.Bytes)
	}
}

type countProgress struct {
	total int64
	n     atomicInt
}

func (p *countProgress) Start(total int64) { p.total = total }
func (p *countProgress) Add(n int64)       { p.n.Add(n) }

type atomicInt struct {
	mu sync.Mutex
	v  int64
}

func (a *atomicInt) Add(n int64) { a.mu.Lock(); a.v += n; a.mu.Unlock() }
func (a *atomicInt) Load() int64 { a.mu.Lock(); defer a.mu.Unlock(); return a.v }

// sha256Hex is the hex sha256 of data.
func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// editSumsLine points SHA256SUMS's line for path at digest, as someone
// covering up a changed file would, leaving runtime-release.json alone.
func editSumsLine(t *testing.T, dir, path, digest string) {
	t.Helper()
	p := filepath.Join(dir, sums.SumsFile)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	found := false
	for i, l := range lines {
		if strings.HasSuffix(l, "  "+path+"\n") {
			lines[i] = digest + "  " + path + "\n"
			found = true
		}
	}
	if !found {
		t.Fatalf("SHA256SUMS has no line for %s", path)
	}
	if err := os.WriteFile(p, []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestListsDisagree checks a file changed with SHA256SUMS edited to match:
// the finding's expected digest is SHA256SUMS's (the authority), actual is
// what is on disk, runtime-release.json's claim is in the detail, no size
// finding borrows runtime-release.json's size under SHA256SUMS's name, and
// the file and both lists are to be fetched again.
func TestListsDisagree(t *testing.T) {
	orig, err := os.ReadFile(filepath.Join(release(t), "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		changed []byte
	}{
		{"same size", append([]byte{orig[0] ^ 0x20}, orig[1:]...)},
		{"longer", append(slices.Clone(orig), "changed\n"...)},
		{"shorter", orig[:len(orig)/2]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyRelease(t)
			if err := os.WriteFile(filepath.Join(dir, "LICENSE"), tt.changed, 0o644); err != nil {
				t.Fatal(err)
			}
			now := sha256Hex(tt.changed)
			editSumsLine(t, dir, "LICENSE", now)
			rep := run(t, dir, false)
			if len(rep.Findings) != 1 {
				t.Fatalf("want one disagree finding:\n%s", dump(rep))
			}
			f := rep.Findings[0]
			if f.Kind != verify.KindDisagree || f.Path != "LICENSE" || f.Authority != sums.SumsFile {
				t.Fatalf("finding %+v", f)
			}
			if f.WantSHA256 != now || f.WantSize != verify.Unknown {
				t.Errorf("expected %s, %d bytes; want SHA256SUMS's claim %s and no size (it gives none)", f.WantSHA256, f.WantSize, now)
			}
			if f.GotSHA256 != now || f.GotSize != int64(len(tt.changed)) {
				t.Errorf("actual %s, %d bytes; want the file on disk, %s, %d bytes", f.GotSHA256, f.GotSize, now, len(tt.changed))
			}
			want := fmt.Sprintf("runtime-release.json says sha256 %s, %d bytes", sha256Hex(orig), len(orig))
			if !strings.Contains(f.Detail, want) {
				t.Errorf("detail %q lacks %q", f.Detail, want)
			}
			if !slices.Equal(rep.Refetch, []string{"LICENSE", sums.SumsFile, sums.RuntimeReleaseFile}) {
				t.Errorf("re-fetch %v", rep.Refetch)
			}
		})
	}
}

// TestMissingSums checks that without SHA256SUMS its absence is the only
// finding: runtime-release.json, which no list names itself, is not extra.
func TestMissingSums(t *testing.T) {
	dir := copyRelease(t)
	if err := os.Remove(filepath.Join(dir, sums.SumsFile)); err != nil {
		t.Fatal(err)
	}
	rep := run(t, dir, false)
	if len(rep.Findings) != 1 || !has(rep, sums.SumsFile, verify.KindMissing) {
		t.Errorf("findings:\n%s", dump(rep))
	}
	if !slices.Equal(rep.Refetch, []string{sums.SumsFile}) {
		t.Errorf("re-fetch %v", rep.Refetch)
	}
}

// TestExtraFiles checks that extra files are hashed, and that one holding a
// missing file's bytes says so on both findings and in the JSON report.
func TestExtraFiles(t *testing.T) {
	notice, err := os.ReadFile(filepath.Join(release(t), "NOTICE"))
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		path, sha256 string
		size         int64
		sameAs       []string
		detail       string
	}
	tests := []struct {
		name    string
		prepare func(t *testing.T, dir string)
		extra   []want
		missing []want
	}{
		{"new file", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "checkpoint", "new.bin"), []byte("new bytes"), 0o644)
		}, []want{{path: "checkpoint/new.bin", sha256: sha256Hex([]byte("new bytes")), size: 9, detail: "not listed"}}, nil},
		{"rename", func(t *testing.T, dir string) {
			if err := os.Rename(filepath.Join(dir, "NOTICE"), filepath.Join(dir, "NOTICE.txt")); err != nil {
				t.Fatal(err)
			}
		}, []want{{path: "NOTICE.txt", sha256: sha256Hex(notice), size: int64(len(notice)), sameAs: []string{"NOTICE"}, detail: "same bytes as missing NOTICE"}},
			[]want{{path: "NOTICE", sameAs: []string{"NOTICE.txt"}, detail: "same bytes as extra NOTICE.txt"}}},
		{"copy elsewhere and a stranger", func(t *testing.T, dir string) {
			if err := os.Rename(filepath.Join(dir, "NOTICE"), filepath.Join(dir, "evidence-NOTICE")); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, "other"), []byte("other"), 0o644)
		}, []want{
			{path: "evidence-NOTICE", sha256: sha256Hex(notice), size: int64(len(notice)), sameAs: []string{"NOTICE"}, detail: "same bytes as missing NOTICE"},
			{path: "other", sha256: sha256Hex([]byte("other")), size: 5, detail: "not listed"},
		}, []want{{path: "NOTICE", sameAs: []string{"evidence-NOTICE"}, detail: "same bytes as extra evidence-NOTICE"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyRelease(t)
			tt.prepare(t, dir)
			rep := run(t, dir, false)
			if len(rep.Findings) != len(tt.extra)+len(tt.missing) {
				t.Fatalf("findings:\n%s", dump(rep))
			}
			find := func(path string, kind verify.Kind) *verify.MismatchError {
				for _, f := range rep.Findings {
					if f.Path == path && f.Kind == kind {
						return f
					}
				}
				t.Fatalf("no %s finding on %s:\n%s", kind, path, dump(rep))
				return nil
			}
			check := func(kind verify.Kind, ws []want) {
				for _, w := range ws {
					f := find(w.path, kind)
					if kind == verify.KindExtra && (f.GotSHA256 != w.sha256 || f.GotSize != w.size) {
						t.Errorf("%s: actual %s, %d bytes; want %s, %d bytes", w.path, f.GotSHA256, f.GotSize, w.sha256, w.size)
					}
					if !slices.Equal(f.SameBytesAs, w.sameAs) || !strings.Contains(f.Detail, w.detail) {
						t.Errorf("%s: same bytes as %v, detail %q; want %v, %q", w.path, f.SameBytesAs, f.Detail, w.sameAs, w.detail)
					}
				}
			}
			check(verify.KindExtra, tt.extra)
			check(verify.KindMissing, tt.missing)

			data, err := json.Marshal(rep)
			if err != nil {
				t.Fatal(err)
			}
			var back struct {
				Findings []struct {
					Kind        verify.Kind
					Path        string
					Actual      *string  `json:"actual_sha256"`
					SameBytesAs []string `json:"same_bytes_as"`
				}
			}
			if err := json.Unmarshal(data, &back); err != nil {
				t.Fatal(err)
			}
			for i, f := range back.Findings {
				me := rep.Findings[i]
				if !slices.Equal(f.SameBytesAs, me.SameBytesAs) || f.Kind == verify.KindExtra && (f.Actual == nil || *f.Actual != me.GotSHA256) {
					t.Errorf("JSON finding %+v for %+v", f, me)
				}
			}
		})
	}
}

// TestBuildCountIsVerifyCount checks that the build and the verification
// of the same release count the same files and bytes: those SHA256SUMS
// lists.
func TestBuildCountIsVerifyCount(t *testing.T) {
	out := filepath.Join(t.TempDir(), "release")
	res, err := bundle.Build(context.Background(), bundletest.Options(t, bundletest.Checkpoint(t), bundletest.Source(t), out))
	if err != nil {
		t.Fatal(err)
	}
	rep := run(t, out, false)
	data, err := os.ReadFile(filepath.Join(out, sums.SumsFile))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := sums.Parse(sums.SumsFile, data, sums.BundlePath)
	if err != nil {
		t.Fatal(err)
	}
	if res.Files != len(entries) || rep.Files != len(entries) || res.Bytes != rep.Bytes {
		t.Errorf("build: %d files, %d bytes; verify: %d files, %d bytes; SHA256SUMS lists %d", res.Files, res.Bytes, rep.Files, rep.Bytes, len(entries))
	}
}

// TestSumsNamesListPath checks that --sums errors and findings name the
// list as it was given, not its base name alone.
func TestSumsNamesListPath(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a"), []byte("alpha"), 0o644)
	tests := []struct {
		name string
		list string // "" for no list file
		// wantErr: the list cannot be read, an operational error naming
		// it. Else one finding whose authority and message name the
		// list, and with wantDetail its detail too.
		wantErr, wantDetail bool
	}{
		{"absent list", "", true, false},
		{"malformed list", "not a line\n", false, true},
		{"missing file", strings.Repeat("0", 64) + "  b\n", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-"))
			if tt.list != "" {
				os.WriteFile(file, []byte(tt.list), 0o644)
			}
			rep, err := verify.Sums(context.Background(), file, verify.Options{})
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), file) {
					t.Fatalf("err = %v, want one naming %s", err, file)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Findings) != 1 {
				t.Fatalf("findings:\n%s", dump(rep))
			}
			f := rep.Findings[0]
			if f.Authority != file || !strings.Contains(f.Error(), file) {
				t.Errorf("finding %q (authority %q) does not name %s", f.Error(), f.Authority, file)
			}
			if tt.wantDetail && !strings.Contains(f.Detail, file) {
				t.Errorf("detail %q does not name %s", f.Detail, file)
			}
		})
	}
}

// drafterRelease builds a test release with a drafter.
func drafterRelease(t *testing.T) string {
	return bundletest.Release(t, func(o *bundle.Options) { o.DrafterDir = bundletest.Drafter(t, o.CheckpointDir) })
}

// TestDrafter: a release's drafter is checked as its checkpoint is — its
// pin, its manifest's file list against the lists, every tensor with Deep —
// and a drafter the lists name but runtime-release.json does not pin, or
// one it pins without the lists naming its manifest, is a finding.
func TestDrafter(t *testing.T) {
	const dm = "drafter/manifest.json"
	rel := drafterRelease(t)
	for _, c := range []struct {
		name  string
		edit  func(t *testing.T, dir string)
		deep  bool
		finds map[string]verify.Kind
	}{
		{"clean", func(*testing.T, string) {}, true, nil},
		{"pin", func(t *testing.T, dir string) {
			resign(t, dir, func(rr *sums.RuntimeRelease) { rr.Drafter.ManifestSHA256 = strings.Repeat("a", 64) })
		}, false, map[string]verify.Kind{dm: verify.KindPin}},
		{"unpinned drafter", func(t *testing.T, dir string) {
			resign(t, dir, func(rr *sums.RuntimeRelease) { rr.Drafter = nil })
		}, false, map[string]verify.Kind{dm: verify.KindDisagree}},
		{"resigned file the drafter's manifest disowns", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "drafter", "drafter.safetensors")
			b, _ := os.ReadFile(p)
			b[len(b)-1] ^= 0xff
			os.WriteFile(p, b, 0o644)
			resign(t, dir, func(*sums.RuntimeRelease) {})
		}, true, map[string]verify.Kind{"drafter/drafter.safetensors": verify.KindTensor}},
		{"drafter manifest gone", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "drafter", "manifest.json"))
		}, false, map[string]verify.Kind{dm: verify.KindMissing}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "r")
			bundletest.CopyDir(t, rel, dir)
			c.edit(t, dir)
			rep := run(t, dir, c.deep)
			if len(c.finds) == 0 {
				if !rep.OK || rep.DrafterManifestSHA256 == "" {
					t.Fatalf("findings:\n%s (drafter manifest %q)", dump(rep), rep.DrafterManifestSHA256)
				}
				return
			}
			for p, k := range c.finds {
				if !has(rep, p, k) {
					t.Errorf("no %s finding for %s:\n%s", k, p, dump(rep))
				}
			}
		})
	}
}
