package verify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/sourcegraph/conc/pool"

	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/format/sshsig"
	"github.com/lfmq/lfmq/internal/bounded"
	"github.com/lfmq/lfmq/verify/sums"
)

// ReadBuffer is the size of each read while hashing.
const ReadBuffer = 1 << 20

// Progress receives hashing progress: Start once with the bytes to hash,
// then Add from any worker goroutine as bytes are hashed.
type Progress interface {
	Start(total int64)
	Add(n int64)
}

// Options configures Release and Sums.
type Options struct {
	// Deep also recomputes every checkpoint tensor's sha256 from its byte
	// span (Release only).
	Deep bool
	// Workers bounds the files hashed at once; 0 means GOMAXPROCS.
	Workers int
	// Progress, if set, is told the bytes hashed.
	Progress Progress
	// AllowedSigners, if set, makes the release signature part of the
	// check (Release only): SHA256SUMS.sig must be an SSHSIG signature over
	// the exact bytes of SHA256SUMS in namespace "lfmq-release" by a key
	// these signers grant to Identity. Without it the signature is not
	// read (and is never an extra file).
	AllowedSigners *sshsig.AllowedSigners
	// Identity is the principal the signing key must be granted to; empty
	// accepts any principal of AllowedSigners (Report.Signature names
	// them).
	Identity string
}

// Report is the outcome of a verification.
type Report struct {
	// Dir is the directory checked.
	Dir string `json:"dir"`
	// List is the list file that was the authority ("SHA256SUMS" for a
	// release).
	List string `json:"list"`
	// ReleaseID is runtime-release.json's release_id, when it parsed.
	ReleaseID string `json:"release_id,omitempty"`
	// Digest is the sha256 of the list file: for a release, the release
	// digest that belongs in the hub tag message.
	Digest string `json:"digest,omitempty"`
	// ManifestSHA256 is the sha256 of checkpoint/manifest.json as found.
	ManifestSHA256 string `json:"manifest_sha256,omitempty"`
	// DrafterManifestSHA256 is the sha256 of drafter/manifest.json as
	// found, in a release with a drafter.
	DrafterManifestSHA256 string `json:"drafter_manifest_sha256,omitempty"`
	// Files and Bytes count the listed files that were hashed: for a clean
	// release, every file SHA256SUMS lists (the same count and bytes as
	// the build reports). The list file itself, the signature and unlisted
	// (extra) files are not counted, though extra files are hashed for
	// their findings.
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
	// Deep reports whether tensors were checked.
	Deep bool `json:"deep"`
	// Signature describes the release signature when it was checked and
	// verified; nil otherwise.
	Signature *Signature `json:"signature,omitempty"`
	// Findings are sorted by path, then kind.
	Findings []*MismatchError `json:"findings"`
	// Refetch is what to download again: every path that is missing, of
	// the wrong size or hash, or a malformed list; for two lists that
	// disagree, both lists and, when they disagree about a file's digest,
	// that file. Sorted, unique.
	Refetch []string `json:"refetch"`
	// OK is true when there is no finding.
	OK bool `json:"ok"`
}

// Err returns nil for a clean report, else a *FindingsError holding every
// finding.
func (r *Report) Err() error {
	if len(r.Findings) == 0 {
		return nil
	}
	return &FindingsError{Findings: r.Findings}
}

// FindingsError joins a report's findings: Unwrap returns each
// *MismatchError, so errors.As and errors.Is see them all; the message is
// one line.
type FindingsError struct {
	Findings []*MismatchError
}

func (e *FindingsError) Error() string {
	s := fmt.Sprintf("verify: %d finding(s)", len(e.Findings))
	if len(e.Findings) > 0 {
		s += "; first: " + strings.TrimPrefix(e.Findings[0].Error(), "verify: ")
	}
	return s
}

// Unwrap returns the findings.
func (e *FindingsError) Unwrap() []error {
	errs := make([]error, len(e.Findings))
	for i, f := range e.Findings {
		errs[i] = f
	}
	return errs
}

// Count returns the number of findings of a kind.
func (r *Report) Count(k Kind) int {
	n := 0
	for _, f := range r.Findings {
		if f.Kind == k {
			n++
		}
	}
	return n
}

// expectation is what the lists say about one file.
type expectation struct {
	path      string
	sha256    string
	size      int64
	authority string
	// sizeAuthority is the list that gave size: SHA256SUMS gives digests
	// only, so a size comes from runtime-release.json even when the digest
	// is SHA256SUMS's. Empty when size is Unknown.
	sizeAuthority string
	// unlisted marks an extra file: hashed so its finding can give its
	// digest, compared with nothing and not counted in Report.Files.
	unlisted bool
}

// onDisk is what hashing found at a path.
type onDisk struct {
	sha256 string
	size   int64
}

// Release verifies the release in dir
// (docs/release.md, "Verifying a release"). The returned error is an
// operational failure (a read error, a cancelled context); findings are in
// the report, and Report.Err returns them as an error.
func Release(ctx context.Context, dir string, opts Options) (*Report, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	defer root.Close()
	rep := &Report{Dir: dir, List: sums.SumsFile, Deep: opts.Deep}
	var findings []*MismatchError
	add := func(f *MismatchError) { findings = append(findings, f) }

	present, err := walk(root, add)
	if err != nil {
		return nil, err
	}

	// The two lists: read strictly, each finding named after its file.
	readList := func(name string) []byte {
		if _, ok := present[name]; !ok {
			add(&MismatchError{Path: name, Kind: KindMissing, WantSize: Unknown, GotSize: Unknown, Authority: "release", Detail: "the release's hash list is absent"})
			return nil
		}
		data, err := readBounded(root, name)
		if err != nil {
			add(&MismatchError{Path: name, Kind: KindMalformed, WantSize: Unknown, GotSize: Unknown, Authority: name, Detail: err.Error()})
			return nil
		}
		return data
	}
	listFinding := func(name string, err error) {
		kind := KindMalformed
		if errors.Is(err, ErrUnsafePath) {
			kind = KindUnsafe
		}
		add(&MismatchError{Path: name, Kind: kind, WantSize: Unknown, GotSize: Unknown, Authority: name, Detail: err.Error()})
	}
	var entries []sums.Entry
	sumsOK := false
	// sumsData is kept: the signature is checked over these exact bytes.
	sumsData := readList(sums.SumsFile)
	if sumsData != nil {
		sum := sha256.Sum256(sumsData)
		rep.Digest = hex.EncodeToString(sum[:])
		if entries, err = sums.Parse(sums.SumsFile, sumsData, sums.BundlePath); err != nil {
			listFinding(sums.SumsFile, err)
		} else {
			sumsOK = true
		}
	}
	var rr *sums.RuntimeRelease
	if data := readList(sums.RuntimeReleaseFile); data != nil {
		if rr, err = sums.ParseRuntimeRelease(data); err != nil {
			listFinding(sums.RuntimeReleaseFile, err)
			rr = nil
		} else {
			rep.ReleaseID = rr.ReleaseID
		}
	}

	// Merge the lists into one expectation per path.
	expect := map[string]*expectation{}
	for _, e := range entries {
		if e.Path == sums.SumsFile {
			add(&MismatchError{Path: sums.SumsFile, Kind: KindMalformed, WantSize: Unknown, GotSize: Unknown, Authority: sums.SumsFile, Detail: fmt.Sprintf("line %d lists SHA256SUMS itself", e.Line)})
			continue
		}
		if e.Path == SignatureFile {
			add(&MismatchError{Path: sums.SumsFile, Kind: KindMalformed, WantSize: Unknown, GotSize: Unknown, Authority: sums.SumsFile, Detail: fmt.Sprintf("line %d lists SHA256SUMS.sig, the signature made over SHA256SUMS after it is written", e.Line)})
			continue
		}
		expect[e.Path] = &expectation{path: e.Path, sha256: e.SHA256, size: Unknown, authority: sums.SumsFile}
	}
	if rr != nil {
		for _, f := range rr.Files {
			if f.Path == SignatureFile {
				add(&MismatchError{Path: sums.RuntimeReleaseFile, Kind: KindMalformed, WantSize: Unknown, GotSize: Unknown, Authority: sums.RuntimeReleaseFile, Detail: "files lists SHA256SUMS.sig, the signature made over SHA256SUMS after the release is built"})
				continue
			}
			x, ok := expect[f.Path]
			switch {
			case !ok && sumsOK:
				add(&MismatchError{Path: f.Path, Kind: KindDisagree, WantSHA256: f.SHA256, WantSize: f.Size, GotSize: Unknown, Authority: sums.RuntimeReleaseFile, Detail: "listed in runtime-release.json, not in SHA256SUMS", refetch: releaseLists})
				fallthrough
			case !ok:
				expect[f.Path] = &expectation{path: f.Path, sha256: f.SHA256, size: f.Size, authority: sums.RuntimeReleaseFile, sizeAuthority: sums.RuntimeReleaseFile}
			case x.sha256 != f.SHA256:
				// SHA256SUMS is the authority: the file is hashed against
				// its digest alone. runtime-release.json's size goes with
				// its other digest, so it is not an expectation; its
				// claim is in the detail, and what is on disk is filled
				// in once the file is hashed (fillOnDisk).
				add(&MismatchError{Path: f.Path, Kind: KindDisagree, WantSHA256: x.sha256, WantSize: Unknown, GotSize: Unknown, Authority: sums.SumsFile,
					Detail: fmt.Sprintf("%s says sha256 %s, %d bytes", sums.RuntimeReleaseFile, f.SHA256, f.Size), refetch: []string{f.Path, sums.SumsFile, sums.RuntimeReleaseFile}})
			default:
				x.size, x.sizeAuthority = f.Size, sums.RuntimeReleaseFile
			}
		}
		if sumsOK {
			for _, e := range entries {
				if e.Path == sums.RuntimeReleaseFile || e.Path == sums.SumsFile || e.Path == SignatureFile {
					continue
				}
				if _, ok := rr.File(e.Path); !ok {
					add(&MismatchError{Path: e.Path, Kind: KindDisagree, WantSHA256: e.SHA256, WantSize: Unknown, GotSize: Unknown, Authority: sums.SumsFile, Detail: "listed in SHA256SUMS, not in runtime-release.json", refetch: releaseLists})
				}
			}
			if _, ok := expect[sums.RuntimeReleaseFile]; !ok {
				add(&MismatchError{Path: sums.RuntimeReleaseFile, Kind: KindDisagree, WantSize: Unknown, GotSize: Unknown, Authority: sums.SumsFile, Detail: "SHA256SUMS does not list runtime-release.json", refetch: releaseLists})
			}
		}
		for _, pt := range releaseParts(rr) {
			if pt.pin == nil {
				continue
			}
			if m, ok := rr.File(pt.manifest); ok && m.SHA256 != pt.pin.ManifestSHA256 {
				// Both claims are the list's own; the actual digest is the
				// file's, filled in once it is hashed.
				add(&MismatchError{Path: pt.manifest, Kind: KindPin, WantSHA256: pt.pin.ManifestSHA256, WantSize: Unknown, GotSize: Unknown, Authority: sums.RuntimeReleaseFile,
					Detail: pt.field + ".manifest_sha256 differs from the files entry, which says sha256 " + m.SHA256})
			}
		}
	}

	// Hash every expected file, and every unlisted one: an extra file's
	// finding gives its digest, which also shows a renamed file. Extras
	// are only meaningful when some list could be read. SHA256SUMS, its
	// signature and runtime-release.json are never extra: no list names
	// the first two, and runtime-release.json is reported by the checks
	// of the lists when it is unlisted, unreadable or absent.
	list := make([]*expectation, 0, len(expect))
	for _, x := range expect {
		list = append(list, x)
	}
	if len(expect) > 0 {
		for p, e := range present {
			if _, ok := expect[p]; !ok && e.regular && p != sums.SumsFile && p != SignatureFile && p != sums.RuntimeReleaseFile {
				list = append(list, &expectation{path: p, size: Unknown, authority: listAuthority(sumsOK), unlisted: true})
			}
		}
	}
	slices.SortFunc(list, func(a, b *expectation) int { return strings.Compare(a.path, b.path) })
	results, err := hashAll(ctx, root, list, present, opts, rep)
	if err != nil {
		return rep, err
	}
	// actual holds the listed files that match their expectation; disk
	// every digest measured.
	actual := map[string]string{}
	disk := map[string]onDisk{}
	var missing, extra []*MismatchError
	for i, x := range list {
		r := results[i]
		if r.hashed {
			disk[x.path] = onDisk{sha256: r.sha256, size: r.size}
		}
		switch {
		case x.unlisted && r.hashed:
			f := &MismatchError{Path: x.path, Kind: KindExtra, WantSize: Unknown, GotSHA256: r.sha256, GotSize: r.size, Authority: x.authority, Detail: "not listed"}
			extra = append(extra, f)
			add(f)
		case x.unlisted:
			// Gone since the walk: no longer extra.
		case r.finding != nil:
			if r.finding.Kind == KindMissing {
				missing = append(missing, r.finding)
			}
			add(r.finding)
		case r.hashed:
			actual[x.path] = x.sha256
		}
	}
	markRenames(missing, extra)

	// Pins and the checkpoint manifest, and the drafter's.
	if rr != nil || sumsOK {
		findings = append(findings, checkCheckpoint(ctx, root, dir, expect, actual, rr, present, opts, rep)...)
		findings = append(findings, checkDrafter(ctx, root, dir, expect, actual, rr, present, opts, rep)...)
	}

	// The signature covers SHA256SUMS byte for byte; with no SHA256SUMS
	// there is nothing to check it over (already a finding).
	if opts.AllowedSigners != nil && sumsData != nil {
		if f := checkSignature(root, present, sumsData, opts, rep); f != nil {
			add(f)
		}
	}

	fillOnDisk(findings, disk)
	sortFindings(findings)
	rep.Findings = findings
	rep.Refetch = refetch(findings, expect)
	rep.OK = len(findings) == 0
	if rep.Findings == nil {
		rep.Findings = []*MismatchError{}
	}
	if rep.Refetch == nil {
		rep.Refetch = []string{}
	}
	return rep, nil
}

func listAuthority(sumsOK bool) string {
	if sumsOK {
		return sums.SumsFile
	}
	return sums.RuntimeReleaseFile
}

// part is an lfmq-1 checkpoint a release carries: the model's under
// checkpoint/, and a drafter's under drafter/ (docs/release.md).
type part struct {
	dir      string // "checkpoint/" or "drafter/"
	manifest string // its manifest's release path
	field    string // runtime-release.json's key pinning it
	pin      *sums.Checkpoint
}

// releaseParts are the checkpoints rr pins.
func releaseParts(rr *sums.RuntimeRelease) []part {
	out := []part{{dir: "checkpoint/", manifest: sums.ManifestPath, field: "checkpoint", pin: &rr.Checkpoint}}
	if rr.Drafter != nil {
		out = append(out, part{dir: "drafter/", manifest: sums.DrafterManifestPath, field: "drafter", pin: rr.Drafter})
	}
	return out
}

// checkCheckpoint checks the manifest pin, the manifest's file list against
// the release's lists and, with Deep, every tensor.
func checkCheckpoint(ctx context.Context, root *os.Root, dir string, expect map[string]*expectation, actual map[string]string, rr *sums.RuntimeRelease, present map[string]entryInfo, opts Options, rep *Report) []*MismatchError {
	pt := part{dir: "checkpoint/", manifest: sums.ManifestPath, field: "checkpoint"}
	if rr != nil {
		pt.pin = &rr.Checkpoint
	}
	if _, ok := expect[sums.ManifestPath]; !ok {
		return []*MismatchError{{Path: sums.ManifestPath, Kind: KindMissing, WantSize: Unknown, GotSize: Unknown, Authority: listAuthority(rr == nil), Detail: "the lists name no checkpoint manifest"}}
	}
	return checkPart(ctx, root, dir, pt, expect, actual, present, opts, &rep.ManifestSHA256)
}

// checkDrafter checks a release's drafter as checkCheckpoint checks its
// model: when runtime-release.json pins one, or the lists name any file
// under drafter/. A release without a drafter has nothing there.
func checkDrafter(ctx context.Context, root *os.Root, dir string, expect map[string]*expectation, actual map[string]string, rr *sums.RuntimeRelease, present map[string]entryInfo, opts Options, rep *Report) []*MismatchError {
	pt := part{dir: "drafter/", manifest: sums.DrafterManifestPath, field: "drafter"}
	if rr != nil {
		pt.pin = rr.Drafter
	}
	listed := false
	for p := range expect {
		listed = listed || strings.HasPrefix(p, pt.dir)
	}
	_, hasManifest := expect[pt.manifest]
	switch {
	case pt.pin == nil && !listed:
		return nil
	case !hasManifest:
		return []*MismatchError{{Path: pt.manifest, Kind: KindMissing, WantSize: Unknown, GotSize: Unknown, Authority: listAuthority(rr == nil), Detail: "the lists name no drafter manifest, but a drafter"}}
	case rr != nil && pt.pin == nil:
		return []*MismatchError{{Path: pt.manifest, Kind: KindDisagree, WantSHA256: expect[pt.manifest].sha256, WantSize: Unknown, GotSize: Unknown, Authority: sums.SumsFile,
			Detail: "the lists name a drafter that runtime-release.json does not pin", refetch: releaseLists}}
	}
	return checkPart(ctx, root, dir, pt, expect, actual, present, opts, &rep.DrafterManifestSHA256)
}

// checkPart checks one checkpoint of the release: its manifest's pin (when
// runtime-release.json parsed), its manifest's file list against the
// release's lists and, with Deep, every tensor. found receives the
// manifest's digest.
func checkPart(ctx context.Context, root *os.Root, dir string, pt part, expect map[string]*expectation, actual map[string]string, present map[string]entryInfo, opts Options, found *string) []*MismatchError {
	var out []*MismatchError
	add := func(f *MismatchError) { out = append(out, f) }
	got, ok := actual[pt.manifest]
	if !ok {
		// Missing or damaged: already a finding; nothing below can be
		// trusted.
		return out
	}
	*found = got
	if pt.pin != nil && got != pt.pin.ManifestSHA256 {
		// When runtime-release.json's files entry already contradicts its
		// pin, that finding stands for this one: the file matched its entry.
		detail := "manifest_sha256 pin"
		if pt.field != "checkpoint" {
			detail = pt.field + ".manifest_sha256 pin"
		}
		add(&MismatchError{Path: pt.manifest, Kind: KindPin, WantSHA256: pt.pin.ManifestSHA256, GotSHA256: got, WantSize: Unknown, GotSize: Unknown, Authority: sums.RuntimeReleaseFile, Detail: detail})
	}
	data, err := readBounded(root, pt.manifest)
	if err != nil {
		add(&MismatchError{Path: pt.manifest, Kind: KindMalformed, WantSize: Unknown, GotSize: Unknown, Authority: pt.manifest, Detail: err.Error()})
		return out
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != got {
		// It changed under us since it was hashed.
		add(&MismatchError{Path: pt.manifest, Kind: KindHash, WantSHA256: got, GotSHA256: hex.EncodeToString(sum[:]), WantSize: Unknown, GotSize: int64(len(data)), Authority: sums.SumsFile, Detail: "changed while being verified"})
		return out
	}
	m, err := lfmq1.ParseManifest(pt.manifest, data)
	if err != nil {
		add(&MismatchError{Path: pt.manifest, Kind: KindMalformed, WantSize: Unknown, GotSize: Unknown, Authority: pt.manifest, Detail: err.Error()})
		return out
	}
	ckDir := pt.dir
	refetchManifest := []string{pt.manifest, sums.SumsFile, sums.RuntimeReleaseFile}
	inManifest := map[string]bool{}
	for _, f := range m.Files {
		p := ckDir + f.Path
		inManifest[p] = true
		x, ok := expect[p]
		switch {
		case !ok:
			add(&MismatchError{Path: p, Kind: KindDisagree, WantSHA256: f.SHA256, WantSize: f.Size, GotSize: Unknown, Authority: pt.manifest, Detail: "in the " + pt.field + " manifest, not in the release's lists",
				refetch: refetchManifest})
		case x.sha256 != f.SHA256 || (x.size != Unknown && x.size != f.Size):
			// Expected is the manifest's claim, actual what is on disk
			// (fillOnDisk); the lists' claim is the detail.
			var claims []string
			if x.sha256 != f.SHA256 {
				claims = append(claims, fmt.Sprintf("%s says sha256 %s", x.authority, x.sha256))
			}
			if x.size != Unknown && x.size != f.Size {
				claims = append(claims, fmt.Sprintf("%s says %d bytes", x.sizeAuthority, x.size))
			}
			add(&MismatchError{Path: p, Kind: KindDisagree, WantSHA256: f.SHA256, WantSize: f.Size, GotSize: Unknown, Authority: pt.manifest, Detail: strings.Join(claims, "; "),
				refetch: append([]string{p}, refetchManifest...)})
		}
	}
	checkpointClean := true
	for p := range expect {
		if strings.HasPrefix(p, ckDir) && p != pt.manifest && !inManifest[p] {
			add(&MismatchError{Path: p, Kind: KindDisagree, WantSize: Unknown, GotSize: Unknown, Authority: pt.manifest, Detail: "in the release's lists, not in the " + pt.field + " manifest",
				refetch: refetchManifest})
		}
	}
	for p, e := range present {
		if strings.HasPrefix(p, ckDir) && !e.regular {
			checkpointClean = false
		}
		if strings.HasPrefix(p, ckDir) && strings.Contains(p[len(ckDir):], "/") {
			checkpointClean = false
		}
	}
	if !opts.Deep {
		return out
	}
	if !checkpointClean {
		add(&MismatchError{Path: pt.field, Kind: KindUnsafe, WantSize: Unknown, GotSize: Unknown, Authority: pt.manifest, Detail: "holds non-regular entries or sub-directories; tensors not checked"})
		return out
	}
	if err := ctx.Err(); err != nil {
		return out
	}
	ck, err := lfmq1.Open(filepath.Join(dir, pt.field), lfmq1.CheckTensors)
	if err == nil {
		ck.Close()
		return out
	}
	for _, e := range lfmq1.Findings(err) {
		f := &MismatchError{Path: pt.manifest, Kind: KindTensor, WantSize: Unknown, GotSize: Unknown, Authority: pt.manifest, Detail: e.Error()}
		var lm *lfmq1.MismatchError
		if errors.As(e, &lm) && lm.Tensor == "" && (lm.Kind == "missing" || lm.Kind == "extra" || lm.Kind == "size" || lm.Kind == "hash") {
			// File-level: the release's lists already reported it.
			continue
		}
		if errors.As(e, &lm) {
			f.Path = ckDir + lm.Path
			if lm.Tensor != "" {
				f.Detail = fmt.Sprintf("tensor %q: %s", lm.Tensor, lm.Kind)
			} else {
				f.Detail = lm.Kind
			}
			if lm.Kind == "hash" {
				f.WantSHA256, f.GotSHA256 = lm.Want, lm.Got
			} else if lm.Want != "" || lm.Got != "" {
				f.Detail += fmt.Sprintf(": manifest says %s, found %s", lm.Want, lm.Got)
			}
		}
		add(f)
	}
	return out
}

func sortFindings(fs []*MismatchError) {
	slices.SortStableFunc(fs, func(a, b *MismatchError) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		if c := strings.Compare(string(a.Kind), string(b.Kind)); c != 0 {
			return c
		}
		return strings.Compare(a.Detail, b.Detail)
	})
}

// Which list is wrong when two disagree cannot be told from the release
// alone: a fresh copy of each list involved settles it.
var (
	releaseLists = []string{sums.SumsFile, sums.RuntimeReleaseFile}
)

// markRenames links each extra file to the missing files whose expected
// digest it has: a rename, or a copy in the wrong place.
func markRenames(missing, extra []*MismatchError) {
	byDigest := map[string][]*MismatchError{}
	for _, m := range missing {
		if m.WantSHA256 != "" {
			byDigest[m.WantSHA256] = append(byDigest[m.WantSHA256], m)
		}
	}
	for _, x := range extra {
		for _, m := range byDigest[x.GotSHA256] {
			x.SameBytesAs = append(x.SameBytesAs, m.Path)
			m.SameBytesAs = append(m.SameBytesAs, x.Path)
		}
	}
	for _, fs := range [][]*MismatchError{missing, extra} {
		for _, f := range fs {
			if len(f.SameBytesAs) == 0 {
				continue
			}
			other := "missing"
			if f.Kind == KindMissing {
				other = "extra"
			}
			note := "same bytes as " + other + " " + strings.Join(f.SameBytesAs, ", ")
			if f.Detail != "" {
				note = f.Detail + "; " + note
			}
			f.Detail = note
		}
	}
}

// fillOnDisk completes the findings of lists that disagree, or a pin that
// does not hold, with what is on disk, so that expected is always a list's
// claim and actual always the file.
func fillOnDisk(fs []*MismatchError, disk map[string]onDisk) {
	for _, f := range fs {
		if f.Kind != KindDisagree && f.Kind != KindPin || f.GotSHA256 != "" {
			continue
		}
		if d, ok := disk[f.Path]; ok {
			f.GotSHA256, f.GotSize = d.sha256, d.size
		}
	}
}

func refetch(fs []*MismatchError, expect map[string]*expectation) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.refetch...)
		switch f.Kind {
		case KindMissing, KindSize, KindHash:
		case KindMalformed:
			if f.Path != sums.SumsFile && f.Path != sums.RuntimeReleaseFile && f.Path != sums.ManifestPath {
				continue
			}
		case KindUnsafe:
			// A link or device where a listed file belongs: replace it.
			if _, ok := expect[f.Path]; !ok {
				continue
			}
		default:
			continue
		}
		out = append(out, f.Path)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// entryInfo is what the walk saw at a path.
type entryInfo struct {
	regular bool
	size    int64
}

// walk lists every entry under root without following links. Symlinks,
// devices and other non-regular entries become unsafe findings and are kept
// as non-regular in the map; directories are not entries. Top-level .git and
// .cache are skipped.
func walk(root *os.Root, add func(*MismatchError)) (map[string]entryInfo, error) {
	present := map[string]entryInfo{}
	err := fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("verify: walking %s: %w", p, err)
		}
		if p == "." {
			return nil
		}
		if d.IsDir() {
			if p == ".git" || p == ".cache" {
				return fs.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return fmt.Errorf("verify: %s: %w", p, err)
			}
			present[p] = entryInfo{regular: true, size: info.Size()}
			return nil
		}
		if (p == ".git" || p == ".cache") && d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		what := "not a regular file"
		if d.Type()&fs.ModeSymlink != 0 {
			what = "a symbolic link (never followed)"
		}
		present[p] = entryInfo{size: Unknown}
		add(&MismatchError{Path: p, Kind: KindUnsafe, WantSize: Unknown, GotSize: Unknown, Authority: "release", Detail: what})
		return nil
	})
	return present, err
}

// readBounded reads a list file through root, refusing anything over the
// list size limit.
func readBounded(root *os.Root, name string) ([]byte, error) {
	data, err := bounded.ReadRootFile(root, name, sums.MaxListBytes)
	if _, ok := err.(*bounded.TooLargeError); ok {
		return nil, sums.ErrTooLarge
	}
	return data, err
}

// hashResult is the outcome of checking one expectation.
type hashResult struct {
	// finding is nil for a match (and always for an unlisted file).
	finding *MismatchError
	// hashed reports whether the file was read to the end; sha256 and
	// size are then what was read.
	hashed bool
	sha256 string
	size   int64
}

// hashAll checks each expectation against the file on disk, in parallel,
// largest files first so the workers finish together.
func hashAll(ctx context.Context, root *os.Root, list []*expectation, present map[string]entryInfo, opts Options, rep *Report) ([]hashResult, error) {
	results := make([]hashResult, len(list))
	type job struct {
		i    int
		size int64
	}
	var jobs []job
	var total int64
	for i, x := range list {
		e, ok := present[x.path]
		switch {
		case !ok:
			results[i].finding = &MismatchError{Path: x.path, Kind: KindMissing, WantSHA256: x.sha256, WantSize: x.size, GotSize: Unknown, Authority: x.authority}
		case !e.regular:
			// The caller has reported it (an unsafe entry of the walk).
		case x.size != Unknown && e.size != x.size:
			// The size is the claim found wrong, so its list is the
			// authority; that list gives the digest too.
			results[i].finding = &MismatchError{Path: x.path, Kind: KindSize, WantSHA256: x.sha256, WantSize: x.size, GotSize: e.size, Authority: x.sizeAuthority}
		default:
			jobs = append(jobs, job{i, e.size})
			total += e.size
		}
	}
	slices.SortStableFunc(jobs, func(a, b job) int {
		switch {
		case a.size > b.size:
			return -1
		case a.size < b.size:
			return 1
		}
		return 0
	})
	if opts.Progress != nil {
		opts.Progress.Start(total)
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var hashed atomic.Int64
	var files atomic.Int64
	p := pool.New().WithContext(ctx).WithMaxGoroutines(workers).WithCancelOnError().WithFirstError()
	bufs := make(chan []byte, workers)
	for _, j := range jobs {
		x := list[j.i]
		p.Go(func(ctx context.Context) error {
			var buf []byte
			select {
			case buf = <-bufs:
			default:
				buf = make([]byte, ReadBuffer)
			}
			defer func() {
				select {
				case bufs <- buf:
				default:
				}
			}()
			sum, n, err := hashFile(ctx, root, x.path, buf, opts.Progress)
			if errors.Is(err, fs.ErrNotExist) {
				if !x.unlisted {
					results[j.i].finding = &MismatchError{Path: x.path, Kind: KindMissing, WantSHA256: x.sha256, WantSize: x.size, GotSize: Unknown, Authority: x.authority, Detail: "disappeared while being verified"}
				}
				return nil
			}
			if err != nil {
				return err
			}
			results[j.i].hashed, results[j.i].sha256, results[j.i].size = true, sum, n
			if x.unlisted {
				return nil
			}
			hashed.Add(n)
			files.Add(1)
			if sum != x.sha256 {
				results[j.i].finding = &MismatchError{Path: x.path, Kind: KindHash, WantSHA256: x.sha256, GotSHA256: sum, WantSize: x.size, GotSize: n, Authority: x.authority}
			}
			return nil
		})
	}
	err := p.Wait()
	rep.Files = int(files.Load())
	rep.Bytes = hashed.Load()
	if err != nil {
		return nil, err
	}
	return results, nil
}

// hashFile hashes one file opened through root (so nothing outside the
// directory is ever read), refusing anything that is not a regular file at
// open time.
func hashFile(ctx context.Context, root *os.Root, name string, buf []byte, prog Progress) (string, int64, error) {
	f, err := root.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return "", 0, fmt.Errorf("verify: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", 0, fmt.Errorf("verify: %w", err)
	}
	if !st.Mode().IsRegular() {
		return "", 0, fmt.Errorf("verify: %s: not a regular file", name)
	}
	h := sha256.New()
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return "", n, err
		}
		k, err := f.Read(buf)
		if k > 0 {
			h.Write(buf[:k])
			n += int64(k)
			if prog != nil {
				prog.Add(int64(k))
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", n, fmt.Errorf("verify: reading %s: %w", name, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// Sums verifies the sha256sum-style list in file: every listed path,
// relative to the file's directory, must exist and have the listed sha256
// (GNU sha256sum -c semantics, with the strict reader of
// docs/release.md, "SHA256SUMS"). Links inside the directory are
// followed; a path that resolves outside it is an unsafe finding.
// Unlisted files are not reported. Report.List is the file's base name
// (Report.Dir its directory); errors and each finding's Authority name
// file as given.
func Sums(ctx context.Context, file string, opts Options) (*Report, error) {
	dir := filepath.Dir(file)
	name := filepath.Base(file)
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, listError(file, err)
	}
	defer root.Close()
	rep := &Report{Dir: dir, List: name}
	data, err := readBounded(root, name)
	if err != nil {
		return nil, listError(file, err)
	}
	sum := sha256.Sum256(data)
	rep.Digest = hex.EncodeToString(sum[:])
	var findings []*MismatchError
	entries, err := sums.Parse(file, data, sums.AnyPath)
	if err != nil {
		kind := KindMalformed
		if errors.Is(err, ErrUnsafePath) {
			kind = KindUnsafe
		}
		findings = append(findings, &MismatchError{Path: name, Kind: kind, WantSize: Unknown, GotSize: Unknown, Authority: file, Detail: err.Error()})
	}
	list := make([]*expectation, len(entries))
	present := map[string]entryInfo{}
	for i, e := range entries {
		list[i] = &expectation{path: e.Path, sha256: e.SHA256, size: Unknown, authority: file}
		st, err := root.Stat(e.Path)
		switch {
		case err == nil && st.Mode().IsRegular():
			present[e.Path] = entryInfo{regular: true, size: st.Size()}
		case err == nil:
			findings = append(findings, &MismatchError{Path: e.Path, Kind: KindMissing, WantSHA256: e.SHA256, WantSize: Unknown, GotSize: Unknown, Authority: file, Detail: "not a regular file"})
			list[i] = nil
		case errors.Is(err, fs.ErrNotExist):
		default:
			// os.Root refuses a path that escapes it (a link out, or a
			// "..").
			findings = append(findings, &MismatchError{Path: e.Path, Kind: KindUnsafe, WantSHA256: e.SHA256, WantSize: Unknown, GotSize: Unknown, Authority: file, Detail: err.Error()})
			list[i] = nil
		}
	}
	list = slices.DeleteFunc(list, func(x *expectation) bool { return x == nil })
	results, err := hashAll(ctx, root, list, present, opts, rep)
	if err != nil {
		return rep, err
	}
	for _, r := range results {
		if r.finding != nil {
			findings = append(findings, r.finding)
		}
	}
	sortFindings(findings)
	rep.Findings = findings
	rep.Refetch = refetch(findings, nil)
	rep.OK = len(findings) == 0
	if rep.Findings == nil {
		rep.Findings = []*MismatchError{}
	}
	if rep.Refetch == nil {
		rep.Refetch = []string{}
	}
	return rep, nil
}

// listError names the list file as it was given: os.Root's errors name the
// path relative to the root only, which for --sums DIR/x is just x.
func listError(file string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("verify: %s: %w", file, err)
}
