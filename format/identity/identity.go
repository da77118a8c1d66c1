package identity

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/lfmq/lfmq/format/canonjson"
	"github.com/lfmq/lfmq/format/hf"
	"github.com/lfmq/lfmq/format/lfmq1"
)

// The values of Checkpoint.Format.
const (
	// FormatHF is a Hugging Face checkpoint directory.
	FormatHF = "hf"
	// FormatLfmq1 is an lfmq-1 checkpoint (it has a manifest.json).
	FormatLfmq1 = lfmq1.FormatName
)

// TokenizerFile is the file whose sha256 is Checkpoint.TokenizerSHA256.
const TokenizerFile = "tokenizer.json"

// Checkpoint is the identity of one checkpoint directory.
type Checkpoint struct {
	// Format is FormatHF or FormatLfmq1.
	Format string
	// Identity is the manifest sha256 of an lfmq-1 checkpoint, and for a
	// Hugging Face checkpoint the sha256 of the canonical JSON of its
	// lfmq1.Source (config sha256 and every top-level file's path, size and
	// sha256), so that changing any byte of any file changes it.
	Identity string
	// ManifestSHA256 is the sha256 of manifest.json (lfmq-1 only; equal to
	// Identity).
	ManifestSHA256 string
	// ConfigSHA256 is the sha256 of config.json.
	ConfigSHA256 string
	// SourceConfigSHA256 is, for an lfmq-1 checkpoint, the config sha256 of
	// the checkpoint it was quantized from, as its manifest records it.
	SourceConfigSHA256 string
	// Experts summarises, for an lfmq-1 checkpoint, how the routed experts
	// are stored: the manifest's method followed by its formats ("rtn
	// bfp4_b", "none bf16"). For a dense LFM2, which has none, it is its
	// FFN class, the one that takes the experts' place.
	Experts string
	// Files lists every regular top-level file of a Hugging Face checkpoint
	// in name order (hidden files and sub-directories are not part of a
	// checkpoint); an lfmq-1 manifest lists its own.
	Files []lfmq1.FileEntry
	// TokenizerSHA256 is the sha256 of tokenizer.json, empty if the
	// directory has none.
	TokenizerSHA256 string
	// Repo and Commit are, for a Hugging Face checkpoint that is a
	// snapshot of the Hugging Face cache, its hub repository and commit
	// (hf.CacheOrigin); SourceRepo and SourceCommit are, for an lfmq-1
	// checkpoint, those its manifest records of its source. Empty when
	// unknown. They name where the bytes came from and are no part of
	// Identity, which the bytes alone decide.
	Repo, Commit             string
	SourceRepo, SourceCommit string
}

// Of returns the identity of the checkpoint in dir. A directory without
// config.json, or with a manifest.json that does not parse, is an error.
func Of(dir string) (*Checkpoint, error) {
	c := &Checkpoint{}
	cfg, _, err := hashFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	c.ConfigSHA256 = cfg
	if lfmq1.IsCheckpoint(dir) {
		m, sum, err := lfmq1.ReadManifest(dir)
		if err != nil {
			return nil, fmt.Errorf("identity: %w", err)
		}
		c.Format, c.Identity, c.ManifestSHA256 = FormatLfmq1, sum, sum
		c.SourceConfigSHA256 = m.Source.ConfigSHA256
		c.SourceRepo, c.SourceCommit = m.Source.Repo, m.Source.Commit
		ex := m.Quantization.Experts
		if m.Quantization.FFN != nil {
			ex = *m.Quantization.FFN
		}
		parts := []string{ex.Method}
		for _, f := range ex.Formats {
			parts = append(parts, string(f))
		}
		c.Experts = strings.TrimSpace(strings.Join(parts, " "))
	} else {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("identity: %w", err)
		}
		src := lfmq1.Source{ConfigSHA256: cfg}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			// A link to a file counts as that file: a snapshot of the
			// Hugging Face cache holds nothing else.
			if st, err := os.Stat(filepath.Join(dir, e.Name())); err != nil || !st.Mode().IsRegular() {
				continue
			}
			sum, size, err := hashFile(filepath.Join(dir, e.Name()))
			if err != nil {
				return nil, err
			}
			src.Files = append(src.Files, lfmq1.FileEntry{Path: e.Name(), Size: size, SHA256: sum})
			if e.Name() == TokenizerFile {
				c.TokenizerSHA256 = sum
			}
		}
		data, err := canonjson.Marshal(src)
		if err != nil {
			return nil, fmt.Errorf("identity: %w", err)
		}
		s := sha256.Sum256(data)
		c.Format, c.Identity, c.Files = FormatHF, hex.EncodeToString(s[:]), src.Files
		c.Repo, c.Commit, _ = hf.CacheOrigin(dir)
	}
	if c.TokenizerSHA256 == "" {
		// An lfmq-1 checkpoint's tokenizer, or a Hugging Face one that is
		// not a regular file (a link), is hashed on its own.
		sum, _, err := hashFile(filepath.Join(dir, TokenizerFile))
		switch {
		case err == nil:
			c.TokenizerSHA256 = sum
		case !errors.Is(err, fs.ErrNotExist):
			return nil, err
		}
	}
	return c, nil
}

func hashFile(path string) (string, int64, error) {
	sum, n, err := lfmq1.HashFile(path)
	if err != nil {
		return "", 0, fmt.Errorf("identity: hashing %s: %w", path, err)
	}
	return sum, n, nil
}
