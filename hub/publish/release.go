package publish

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/lfmq/lfmq/format/sshsig"
	"github.com/lfmq/lfmq/internal/bounded"
	"github.com/lfmq/lfmq/verify"
	"github.com/lfmq/lfmq/verify/sums"
)

// Bounds on what is read into memory.
const (
	maxAttributesBytes = 1 << 20
	// maxInlineBytes bounds a file committed inline (base64 in the
	// commit); the hub wants larger files in LFS long before this.
	maxInlineBytes = 64 << 20
)

// relFile is one file of the release.
type relFile struct {
	path   string
	size   int64
	sha256 string
	// lfs: the release's .gitattributes routes it to LFS.
	lfs bool
}

// release is a release directory as the lists describe it.
type release struct {
	root      *os.Root
	files     []*relFile // sorted by path
	byPath    map[string]*relFile
	id        string // release_id
	revision  string // runtime-release.json's revision
	digest    string // sha256(SHA256SUMS)
	attrsText *string
	attrs     *gitAttributes
}

// loadRelease reads the release's lists. The files are those SHA256SUMS
// lists, SHA256SUMS itself and SHA256SUMS.sig when present: the lists,
// not a directory walk, say what the release is (anything else in the
// directory is not published). Sizes come from the file system and must
// equal runtime-release.json's; digests come from SHA256SUMS and are not
// recomputed here.
func loadRelease(dir string) (*release, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, &ReleaseError{Path: dir, Msg: err.Error()}
	}
	rel := &release{root: root, byPath: map[string]*relFile{}}
	fail := func(err error) (*release, error) {
		root.Close()
		return nil, err
	}
	list, err := readBounded(root, sums.SumsFile, sums.MaxListBytes)
	if err != nil {
		return fail(err)
	}
	entries, err := sums.Parse(sums.SumsFile, list, sums.BundlePath)
	if err != nil {
		return fail(&ReleaseError{Path: sums.SumsFile, Msg: err.Error()})
	}
	sum := sha256.Sum256(list)
	rel.digest = hex.EncodeToString(sum[:])
	sizes := map[string]int64{}
	if slices.ContainsFunc(entries, func(e sums.Entry) bool { return e.Path == sums.RuntimeReleaseFile }) {
		data, err := readBounded(root, sums.RuntimeReleaseFile, sums.MaxListBytes)
		if err != nil {
			return fail(err)
		}
		rr, err := sums.ParseRuntimeRelease(data)
		if err != nil {
			return fail(&ReleaseError{Path: sums.RuntimeReleaseFile, Msg: err.Error()})
		}
		rel.id, rel.revision = rr.ReleaseID, rr.Revision
		for _, f := range rr.Files {
			sizes[f.Path] = f.Size
		}
	}
	add := func(p, digest string) error {
		info, err := root.Lstat(p)
		if err != nil {
			return &ReleaseError{Path: p, Msg: err.Error()}
		}
		if !info.Mode().IsRegular() {
			return &ReleaseError{Path: p, Msg: "not a regular file"}
		}
		if want, ok := sizes[p]; ok && want != info.Size() {
			return &ReleaseError{Path: p, Msg: fmt.Sprintf("%d bytes, runtime-release.json says %d; verify the release", info.Size(), want)}
		}
		f := &relFile{path: p, size: info.Size(), sha256: digest}
		rel.files = append(rel.files, f)
		rel.byPath[p] = f
		return nil
	}
	for _, e := range entries {
		if e.Path == sums.SumsFile || e.Path == verify.SignatureFile {
			return fail(&ReleaseError{Path: e.Path, Msg: "SHA256SUMS lists itself or its signature"})
		}
		if err := add(e.Path, e.SHA256); err != nil {
			return fail(err)
		}
	}
	if err := add(sums.SumsFile, rel.digest); err != nil {
		return fail(err)
	}
	if _, err := root.Lstat(verify.SignatureFile); err == nil {
		sig, err := readBounded(root, verify.SignatureFile, sshsig.MaxSignatureBytes)
		if err != nil {
			return fail(err)
		}
		s := sha256.Sum256(sig)
		if err := add(verify.SignatureFile, hex.EncodeToString(s[:])); err != nil {
			return fail(err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fail(&ReleaseError{Path: verify.SignatureFile, Msg: err.Error()})
	}
	slices.SortFunc(rel.files, func(a, b *relFile) int { return strings.Compare(a.path, b.path) })
	if _, ok := rel.byPath[".gitattributes"]; ok {
		data, err := readBounded(root, ".gitattributes", maxAttributesBytes)
		if err != nil {
			return fail(err)
		}
		text := string(data)
		rel.attrsText, rel.attrs = &text, parseGitAttributes(text)
	}
	for _, f := range rel.files {
		f.lfs = f.size > 0 && rel.attrs.lfs(f.path)
	}
	return rel, nil
}

// readBounded reads a release file of at most limit bytes.
func readBounded(root *os.Root, p string, limit int64) ([]byte, error) {
	data, err := bounded.ReadRootFile(root, p, limit)
	if _, ok := err.(*bounded.TooLargeError); ok {
		return nil, &ReleaseError{Path: p, Msg: fmt.Sprintf("larger than %d bytes", limit)}
	} else if err != nil {
		return nil, &ReleaseError{Path: p, Msg: err.Error()}
	}
	return data, nil
}

// sample returns the first 512 bytes of a file, for preupload.
func (r *release) sample(f *relFile) ([]byte, error) {
	h, err := r.root.Open(f.path)
	if err != nil {
		return nil, &ReleaseError{Path: f.path, Msg: err.Error()}
	}
	defer h.Close()
	buf := make([]byte, min(f.size, 512))
	if _, err := io.ReadFull(h, buf); err != nil {
		return nil, &ReleaseError{Path: f.path, Msg: err.Error()}
	}
	return buf, nil
}

// content reads a file to be committed inline and checks it against
// SHA256SUMS: the directory must not have changed since it was verified.
func (r *release) content(f *relFile) ([]byte, error) {
	if f.size > maxInlineBytes {
		return nil, &ReleaseError{Path: f.path, Msg: fmt.Sprintf("%d bytes is too large to commit as a regular file; route it to LFS in .gitattributes", f.size)}
	}
	data, err := readBounded(r.root, f.path, f.size)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != f.sha256 || int64(len(data)) != f.size {
		return nil, &ReleaseError{Path: f.path, Msg: fmt.Sprintf("sha256 %s, SHA256SUMS says %s; verify the release", got, f.sha256)}
	}
	return data, nil
}

// blobOID returns the git blob id of a file, sha1("blob <size>\0" +
// content), streamed: what the hub's tree gives as a regular file's oid.
func (r *release) blobOID(f *relFile) (string, error) {
	h, err := r.root.Open(f.path)
	if err != nil {
		return "", &ReleaseError{Path: f.path, Msg: err.Error()}
	}
	defer h.Close()
	d := sha1.New()
	fmt.Fprintf(d, "blob %d\x00", f.size)
	n, err := io.CopyBuffer(d, h, make([]byte, 1<<20))
	if err != nil {
		return "", &ReleaseError{Path: f.path, Msg: err.Error()}
	}
	if n != f.size {
		return "", &ReleaseError{Path: f.path, Msg: "changed size while read; verify the release"}
	}
	return hex.EncodeToString(d.Sum(nil)), nil
}
